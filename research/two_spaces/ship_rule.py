"""Issue 50's ship rule over one candidate's dev figures (scripts/dev_report.sh's output folder).

    python research/two_spaces/ship_rule.py REPORT_DIR CANDIDATE_NAME [--markdown]

Per figure: the candidate, today's default and MiniLM with the instruction pasted, the paired gain
over the default with its 95 % interval, and the rule's verdict:
- against the default, SciFact nDCG@10 and the 58 dev groups (first in group) significantly higher;
  no figure significantly lower (interval entirely below zero);
- against MiniLM pasted, the point estimate at least as high on every figure.
Query latency, indexing speed and the wheel's size are checked by their own commands
(benchmarks/bench_index.py, tests/test_wheel.py). A candidate scored on the line's figures only
(no facet groups) is judged on those, and said so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# (figure, where it comes from): facet figures from the facet harness's comparisons, the others
# from `instemb-rag compare` rows.
FACETS = [
    ("58 dev groups, first in group", "dev", "first_in_group"),
    ("58 dev groups, first in pool", "dev", "first_in_pool"),
    ("Factbook (held-out source), first in group", "heldout_source", "first_in_group"),
    ("Factbook, first in pool", "heldout_source", "first_in_pool"),
]
STEERING = [
    ("SciFact nDCG@10, 100 held-out claims", "scifact", "ndcg@10"),
    ("pooled stance", "stance-pooled", "pairwise_accuracy"),
    ("stance: support", "stance-pooled", "pairwise_accuracy_support"),
    ("stance: refute", "stance-pooled", "pairwise_accuracy_refute"),
    ("negation pairs (NLI stance)", "nli-stance", "pairwise_accuracy"),
]
MUST_RISE = {"58 dev groups, first in group", "SciFact nDCG@10, 100 held-out claims"}


def facet_rows(report: Path, name: str) -> list[dict]:
    rows = []
    for figure, groups, metric in FACETS:
        path = report / f"facets_{groups}_{name}.json"
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        by_label = {result["encoder"]["label"]: result["metrics"] for result in data["results"]}
        candidate_label = data["facet_groups"]["comparisons"][0]["candidate"]
        against = {c["baseline"]: c["gains"][metric] for c in data["facet_groups"]["comparisons"]}
        default = next(label for label in by_label if label.endswith(" default"))
        pasted = next(label for label in by_label if label.startswith("teacher:"))
        gain = against[default]
        rows.append(
            {
                "figure": figure,
                "candidate": by_label[candidate_label][metric],
                "default": by_label[default][metric],
                "pasted": by_label[pasted][metric],
                "gain": gain["gain"],
                "interval": gain["interval"],
            }
        )
    return rows


def steering_rows(report: Path, name: str) -> list[dict]:
    paired = json.loads((report / f"paired_{name}_vs_default.json").read_text())["rows"]
    pasted = {
        (r["task"], r["metric"]): r["baseline"]
        for r in json.loads((report / f"paired_{name}_vs_pasted.json").read_text())["rows"]
    }
    by_key = {(r["task"], r["metric"]): r for r in paired}
    rows = []
    for figure, task, metric in STEERING:
        row = by_key.get((task, metric))
        if row is None:
            continue
        rows.append(
            {
                "figure": figure,
                "candidate": row["candidate"],
                "default": row["baseline"],
                "pasted": pasted.get((task, metric)),
                "gain": row["gain"],
                "interval": row["interval"],
            }
        )
    return rows


def verdicts(rows: list[dict]) -> list[dict]:
    for row in rows:
        low, high = row["interval"]
        failures = []
        if row["figure"] in MUST_RISE and not low > 0:
            failures.append("not significantly above the default")
        if high < 0:
            failures.append("significantly below the default")
        if row["pasted"] is not None and row["candidate"] < row["pasted"]:
            failures.append("below MiniLM pasted")
        row["verdict"] = "; ".join(failures) or "passes"
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "| figure | candidate | default | MiniLM pasted | vs default [95 %] | rule |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        pasted = "" if row["pasted"] is None else f"{row['pasted']:.3f}"
        low, high = row["interval"]
        lines.append(
            f"| {row['figure']} | {row['candidate']:.3f} | {row['default']:.3f} | {pasted} | "
            f"{row['gain']:+.3f} [{low:+.3f}, {high:+.3f}] | {row['verdict']} |"
        )
    return "\n".join(lines)


def judge(name: str, rows: list[dict], wanted: list[str]) -> int:
    """Print the table and the verdict of judged ``rows``; 0 when every ``wanted`` figure passes."""
    print(markdown(rows).replace("[+nan, +nan]", "(point)"))
    missing = [figure for figure in wanted if figure not in {row["figure"] for row in rows}]
    passed = not missing and all(row["verdict"] == "passes" for row in rows)
    if missing:
        print(f"\nnot measured (not judged): {', '.join(missing)}")
    print(f"\n{name}: {'PASSES' if passed else 'does not pass'} the figures of the ship rule")
    return 0 if passed else 1


def main(report: str, name: str) -> int:
    folder = Path(report)
    rows = verdicts(facet_rows(folder, name) + steering_rows(folder, name))
    return judge(name, rows, [figure for figure, *_ in FACETS + STEERING])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
