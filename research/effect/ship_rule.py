"""Issue 56's ship rule over one candidate's dev figures (research/effect/round.sh's output folder).

    python research/effect/ship_rule.py REPORT_DIR CANDIDATE_NAME

The figures and pairing are issue 50's (research/two_spaces/ship_rule.py reads them); the rule is
issue 56's, fixed before any candidate was scored:
- against today's default: SciFact and the 58 dev groups (first in group) significantly higher; no
  figure significantly lower (groups and Factbook in group and in pool, pooled stance and each
  label, negation pairs);
- against MiniLM with the instruction pasted: the point estimate at least as high on the groups,
  Factbook, pooled stance, each stance label and negation pairs; SciFact with its instruction at
  least MiniLM's minus 0.02, and without an instruction at least MiniLM's without one.
Query p50, indexing speed and the wheel's size are checked by their own commands
(benchmarks/bench_index.py, tests/test_wheel.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "two_spaces"))
from ship_rule import FACETS, STEERING, facet_rows, judge, steering_rows  # noqa: E402

SCIFACT = "SciFact nDCG@10, 100 held-out claims"
WITHOUT = "SciFact without an instruction"
MUST_RISE = {"58 dev groups, first in group", SCIFACT}


def scifact_without(report: Path, name: str) -> list[dict]:
    """SciFact nDCG@10 with the queries' instruction left out, beside MiniLM's own (no interval:
    judged on the point estimate)."""

    def ndcg(label: str) -> float | None:
        path = report / f"scifact-noinst_{label}.json"
        if not path.is_file():
            return None
        return json.loads(path.read_text())["results"][0]["metrics"]["ndcg@10"]

    candidate, default, pasted = ndcg(name), ndcg("default"), ndcg("pasted")
    if candidate is None:
        return []
    return [
        {"figure": WITHOUT, "candidate": candidate, "default": default or 0.0, "pasted": pasted}
        | {"gain": candidate - (default or 0.0), "interval": [float("nan"), float("nan")]}
    ]


def verdicts(rows: list[dict]) -> list[dict]:
    for row in rows:
        low, high = row["interval"]
        failures = []
        if row["figure"] in MUST_RISE and not low > 0:
            failures.append("not significantly above the default")
        if high < 0:
            failures.append("significantly below the default")
        margin = 0.02 if row["figure"] == SCIFACT else 0.0
        if row["pasted"] is not None and row["candidate"] < row["pasted"] - margin:
            failures.append("below MiniLM pasted" + (" - 0.02" if margin else ""))
        row["verdict"] = "; ".join(failures) or "passes"
    return rows


def main(report: str, name: str) -> int:
    folder = Path(report)
    rows = verdicts(facet_rows(folder, name) + steering_rows(folder, name) + scifact_without(folder, name))
    return judge(name, rows, [figure for figure, *_ in FACETS + STEERING] + [WITHOUT])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
