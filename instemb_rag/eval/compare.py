"""Paired comparison of two encoders' saved results, item by item.

``instemb-rag eval`` writes, for every task whose metric is a mean over items (retrieval
queries, stance records, facets, NLI claims), one value per item (``per_item``). The items a
task scores are fixed by its data and limits (seeded samples, ``--exclude-seen``), never by the
encoder, so two results of the same task and limits list the same items in the same order. Where a result
names its items (``item_ids``: the stance and steering tasks, ``stance-pooled`` among them), the
pairs are made on those ids, not on the order, and the items of one group (a claim under both
stances) are resampled together. A paired bootstrap of the difference (eval/bootstrap.py ``paired_gain``) then tells a real gap from
resampling noise far more sharply than two separate intervals: both encoders face the same hard
queries. Spearman (STS-B) is not a mean over items and has no paired figure here; facet groups
pair within their own harness (``eval facet-groups --against``).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InstEmbError
from .bootstrap import paired_gain
from .results import item_cluster

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


def _paired_values(task: str, metric: str, candidate: dict, baseline: dict) -> tuple[list[float], list | None]:
    """The baseline's values of ``metric`` in the candidate's item order, and the candidate's item
    clusters (None where the results name no items: then the two orders must already agree)."""
    values, theirs = candidate["per_item"][metric], baseline["per_item"][metric]
    ids = (candidate.get("item_ids") or {}).get(metric)
    their_ids = (baseline.get("item_ids") or {}).get(metric)
    if ids is None or their_ids is None:
        if len(theirs) != len(values):
            raise CompareError(
                f"{task} {metric}: {len(values)} items against {len(theirs)}; the data changed between "
                "the two runs: evaluate both again."
            )
        return theirs, None
    for name, named, scored in (("candidate", ids, values), ("baseline", their_ids, theirs)):
        if len(named) != len(scored) or len(set(named)) != len(named):
            raise CompareError(
                f"{task} {metric}: the {name}'s item ids are not one per value; the file was edited or "
                "truncated: evaluate again."
            )
    only_here, only_there = sorted(set(ids) - set(their_ids)), sorted(set(their_ids) - set(ids))
    if only_here or only_there:
        raise CompareError(
            f"{task} {metric}: the two results scored different items ({len(only_here)} only in the "
            f"candidate, e.g. {only_here[:2]}; {len(only_there)} only in the baseline, e.g. {only_there[:2]}); "
            "run both with the same task options and data."
        )
    position = {item: index for index, item in enumerate(their_ids)}
    return [theirs[position[item]] for item in ids], [item_cluster(item) for item in ids]


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
            if other["per_item"].get(metric) is None:
                continue
            theirs, clusters = _paired_values(task, metric, result, other)
            rows.append(
                {
                    "task": task,
                    "metric": metric,
                    "items": len(values),
                    "candidate": round(sum(values) / len(values), 4),
                    "baseline": round(sum(theirs) / len(theirs), 4),
                    **paired_gain(values, theirs, clusters, seed=seed),
                }
            )
    if not rows:
        raise CompareError("no task of the two files can be paired: " + "; ".join(notes or ["no tasks"]))
    return rows, notes
