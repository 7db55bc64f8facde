"""Issue 56's ship rule over one candidate's dev figures (research/effect/round.sh's output folder).

    python research/effect/ship_rule.py REPORT_DIR CANDIDATE_NAME [--rule 61]

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

``--rule 61``: issue 61's rule, fixed in the issue before any candidate was scored, where today's
default is the shipped ``effect-r2-gain``:
- significantly higher than the default on the trap dev set (eval_sets/traps, first in corpus:
  REPORT_DIR/traps_NAME.json from research/effect/traps.py) and on pooled stance;
- refute and negation pairs at or above the untrained arrangement at s = 1 (0.357, 0.670);
- the 58 dev groups and Factbook first in group at or above the default's point figure;
- SciFact with its instruction >= 0.696 (the default - 0.01); without one, the default's (MiniLM's);
- nothing significantly lower than the default.
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


TRAPS = "trap dev set, first in corpus"
# Issue 61: figure -> (kind, threshold). "rise": significantly above the default; "at least":
# the point estimate at or above the threshold (None: the default's own point figure).
RULE_61 = {
    TRAPS: ("rise", None),
    "pooled stance": ("rise", None),
    "stance: refute": ("at least", 0.357),
    "negation pairs (NLI stance)": ("at least", 0.670),
    "58 dev groups, first in group": ("at least", None),
    "Factbook (held-out source), first in group": ("at least", None),
    SCIFACT: ("at least", 0.696),
    WITHOUT: ("at least", None),
}


def trap_rows(report: Path, name: str) -> list[dict]:
    """The trap dev set's pooled first-in-corpus figure (research/effect/traps.py, the candidate
    paired with the default), plus each corpus's point figure (reported, judged only pooled)."""
    path = report / f"traps_{name}.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    default = data["models"][data["baseline"]]
    candidate = next(result for label, result in data["models"].items() if label != data["baseline"])
    rows = [
        {"figure": TRAPS, "candidate": candidate["first_in_corpus"], "default": default["first_in_corpus"]}
        | {"pasted": None, "gain": candidate["vs_baseline"]["gain"], "interval": candidate["vs_baseline"]["interval"]}
    ]
    for corpus, value in candidate["per_corpus"].items():
        base = default["per_corpus"][corpus]
        rows.append(
            {"figure": f"traps: {corpus}", "candidate": value, "default": base, "pasted": None}
            | {"gain": value - base, "interval": [float("nan"), float("nan")]}
        )
    return rows


def verdicts_61(rows: list[dict]) -> list[dict]:
    for row in rows:
        low, high = row["interval"]
        kind, threshold = RULE_61.get(row["figure"], ("reported", None))
        failures = []
        if kind == "rise" and not low > 0:
            failures.append("not significantly above the default")
        if kind == "at least":
            bar = row["default"] if threshold is None else threshold
            if row["candidate"] < bar - 1e-9:
                failures.append(f"below {bar:.3f}")
        if high < 0:
            failures.append("significantly below the default")
        row["verdict"] = "; ".join(failures) or "passes"
    return rows


def main(report: str, name: str, *options: str) -> int:
    folder = Path(report)
    rows = facet_rows(folder, name) + steering_rows(folder, name) + scifact_without(folder, name)
    if options == ("--rule", "61"):
        return judge(name, verdicts_61(trap_rows(folder, name) + rows), list(RULE_61))
    if options:
        raise SystemExit(f"unknown options {options}: the only one is --rule 61")
    rows = verdicts(rows)
    return judge(name, rows, [figure for figure, *_ in FACETS + STEERING] + [WITHOUT])


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
