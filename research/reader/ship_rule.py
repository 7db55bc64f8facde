"""Issue 67's ship rule over one round (research/reader/round.sh's folder), fixed in the issue before
any reader was scored; paired 95 % bootstrap against the shipped default without a reader:

- traps (eval_sets/traps) >= 25/30 and significantly above the default;
- eval_sets/own_files >= 10 of 12;
- negation pairs >= 0.670 and refute >= 0.357; SciFact with its instruction >= 0.696, and SciFact
  without an instruction not significantly lower than the default's;
- dev facet groups, Factbook and pooled stance not significantly lower than the default;
- (the query's cost is benchmarks/bench_cli.py's, reported beside).

    python research/reader/ship_rule.py REPORT_DIR      -> REPORT_DIR/ship_rule.md and .json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from instemb_rag.eval.bootstrap import paired_gain


def task_result(report: Path, task: str, side: str) -> dict:
    return json.loads((report / f"{task}_{side}.json").read_text())["results"][0]


def paired_task(report: Path, task: str, metric: str) -> dict:
    """Candidate (reader) and default figures of one metric, paired item by item (same ids, same order)."""
    reader, default = task_result(report, task, "reader"), task_result(report, task, "default")
    ids_reader, ids_default = reader["item_ids"].get(metric), default["item_ids"].get(metric)
    if ids_reader is not None and ids_reader != ids_default:
        raise SystemExit(f"{task} {metric}: the two runs scored different items; delete both files and run again.")
    values_reader, values_default = reader["per_item"][metric], default["per_item"][metric]
    return {
        "candidate": reader["metrics"][metric],
        "default": default["metrics"][metric],
        **paired_gain(values_reader, values_default),
    }


def facet_pair(report: Path, name: str, metric: str = "first_in_group") -> dict:
    data = json.loads((report / f"facets_{name}.json").read_text())
    results = data["results"]
    comparison = next(c for c in data["facet_groups"]["comparisons"] if "reader" in c["candidate"])
    candidate = next(r for r in results if r["encoder"]["label"] == comparison["candidate"])
    baseline = next(r for r in results if r["encoder"]["label"] == comparison["baseline"])
    return {
        "candidate": candidate["metrics"][metric],
        "default": baseline["metrics"][metric],
        **comparison["gains"][metric],
    }


def first_hits(rows: list[dict]) -> list[float]:
    return [float(row["rank"] == 1) for row in rows]


def traps_pair(report: Path) -> dict:
    data = json.loads((report / "traps.json").read_text())["models"]
    reader = next(value for key, value in data.items() if "+reader:" in key)
    return {
        "candidate": reader["first_in_corpus"],
        "default": data["default"]["first_in_corpus"],
        "right": sum(first_hits(reader["rows"])),
        "of": len(reader["rows"]),
        "per_corpus": reader["per_corpus"],
        **paired_gain(first_hits(reader["rows"]), first_hits(data["default"]["rows"])),
    }


def own_files(report: Path) -> dict:
    data = json.loads((report / "own_files.json").read_text())
    reader = next(value for key, value in data.items() if "+reader:" in key)
    return {
        "candidate": reader["right_first"],
        "default": data["default"]["right_first"],
        "of": reader["of"],
        "ranks": [row["rank"] for row in reader["rows"]],
        "default_ranks": [row["rank"] for row in data["default"]["rows"]],
    }


def not_lower(row: dict) -> bool:
    return row["interval"][1] >= 0


def verdicts(report: Path) -> list[dict]:
    traps = traps_pair(report)
    files = own_files(report)
    negation = paired_task(report, "nli-stance", "pairwise_accuracy")
    refute = paired_task(report, "stance-pooled", "pairwise_accuracy_refute")
    scifact = paired_task(report, "scifact", "ndcg@10")
    plain = paired_task(report, "scifact-noinst", "ndcg@10")
    pooled = paired_task(report, "stance-pooled", "pairwise_accuracy")
    groups, factbook = facet_pair(report, "dev"), facet_pair(report, "heldout_source")
    return [
        {
            "figure": "traps, first in corpus",
            **traps,
            "passes": traps["right"] >= 25 and traps["above_zero"],
            "rule": ">= 25/30 and significantly above the default",
        },
        {"figure": "own files, right first", **files, "passes": files["candidate"] >= 10, "rule": ">= 10 of 12"},
        {"figure": "negation pairs", **negation, "passes": negation["candidate"] >= 0.670, "rule": ">= 0.670"},
        {"figure": "stance: refute", **refute, "passes": refute["candidate"] >= 0.357, "rule": ">= 0.357"},
        {
            "figure": "SciFact nDCG@10 with its instruction",
            **scifact,
            "passes": scifact["candidate"] >= 0.696,
            "rule": ">= 0.696",
        },
        {
            "figure": "SciFact nDCG@10 without an instruction",
            **plain,
            "passes": not_lower(plain),
            "rule": "not significantly lower",
        },
        {
            "figure": "58 dev groups, first in group",
            **groups,
            "passes": not_lower(groups),
            "rule": "not significantly lower",
        },
        {
            "figure": "Factbook, first in group",
            **factbook,
            "passes": not_lower(factbook),
            "rule": "not significantly lower",
        },
        {"figure": "pooled stance", **pooled, "passes": not_lower(pooled), "rule": "not significantly lower"},
    ]


def table(rows: list[dict]) -> str:
    lines = ["| figure | with the reader | default | vs default [95 %] | rule | passes |", "|---|---|---|---|---|---|"]
    for row in rows:
        gain = (
            f"{row['gain']:+.3f} [{row['interval'][0]:+.3f}, {row['interval'][1]:+.3f}]" if "gain" in row else "(count)"
        )
        value = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
        lines.append(
            f"| {row['figure']} | {value(row['candidate'])} | {value(row['default'])} | {gain} | {row['rule']} | {'yes' if row['passes'] else '**no**'} |"
        )
    return "\n".join(lines)


def main(report: str) -> None:
    folder = Path(report)
    rows = verdicts(folder)
    shipped = all(row["passes"] for row in rows)
    text = table(rows) + f"\n\n**Verdict: {'passes: ship' if shipped else 'does not pass'}.**\n"
    (folder / "ship_rule.md").write_text(text)
    (folder / "ship_rule.json").write_text(json.dumps({"passes": shipped, "rows": rows}, indent=2))
    print(text)


if __name__ == "__main__":
    main(sys.argv[1])
