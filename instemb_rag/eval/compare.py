"""Paired comparison of two encoders' saved results, item by item.

``instemb-rag eval`` writes, for every task whose metric is a mean over items (retrieval
queries, stance records, facets, NLI claims), one value per item (``per_item``). The items a
task scores are fixed by its data and limits (seeded samples, ``--exclude-seen``), never by the
encoder, so two results of the same task and limits list the same items in the same order. A
paired bootstrap of the difference (eval/bootstrap.py ``paired_gain``) then tells a real gap from
resampling noise far more sharply than two separate intervals: both encoders face the same hard
queries. Spearman (STS-B) is not a mean over items and has no paired figure here; facet groups
pair within their own harness (``eval facet-groups --against``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InstEmbError
from .bootstrap import paired_gain

__all__ = ["CompareError", "compare_results", "read_results"]


class CompareError(InstEmbError):
    pass


def read_results(path: str | Path) -> list[dict]:
    """The ``results`` list of an ``instemb-rag eval --json`` file, checked."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise CompareError(f"{path} not found: give the JSON file an `instemb-rag eval ... -o FILE` wrote.") from None
    except json.JSONDecodeError as error:
        raise CompareError(f"{path} is not JSON ({error}); give a file `instemb-rag eval ... -o FILE` wrote.") from None
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list) or not all(isinstance(r, dict) and "task" in r for r in results):
        raise CompareError(f"{path} holds no 'results' list of task results; is it an `instemb-rag eval` file?")
    return results


def _same_items(candidate: dict, baseline: dict) -> None:
    task = candidate["task"]
    for field in ("limits", "counts", "instruction"):
        if candidate.get(field) != baseline.get(field):
            raise CompareError(
                f"{task}: the two results scored different items ({field} {candidate.get(field)} vs "
                f"{baseline.get(field)}); run both with the same task options to pair them."
            )


def compare_results(candidate: list[dict], baseline: list[dict], seed: int = 0) -> tuple[list[dict], list[str]]:
    """Paired gains (candidate - baseline) per task and metric, and notes on tasks left out."""
    by_task = {result["task"]: result for result in baseline}
    rows: list[dict] = []
    notes: list[str] = []
    for result in candidate:
        task = result["task"]
        other = by_task.get(task)
        if other is None:
            notes.append(f"{task}: not in the baseline's results")
            continue
        if not result.get("per_item") or not other.get("per_item"):
            notes.append(
                f"{task}: no per-item values in one of the files (STS and facet groups have none here; "
                "results written before per-item values existed need `instemb-rag eval` again)"
            )
            continue
        _same_items(result, other)
        for metric, values in result["per_item"].items():
            theirs = other["per_item"].get(metric)
            if theirs is None:
                continue
            if len(theirs) != len(values):
                raise CompareError(
                    f"{task} {metric}: {len(values)} items against {len(theirs)}; the data changed between "
                    "the two runs: evaluate both again."
                )
            rows.append(
                {
                    "task": task,
                    "metric": metric,
                    "items": len(values),
                    "candidate": round(sum(values) / len(values), 4),
                    "baseline": round(sum(theirs) / len(theirs), 4),
                    **paired_gain(values, theirs, seed=seed),
                }
            )
    if not rows:
        raise CompareError("no task of the two files can be paired: " + "; ".join(notes or ["no tasks"]))
    return rows, notes
