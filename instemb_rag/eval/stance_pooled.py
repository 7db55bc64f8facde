"""``stance-pooled``: the pooled stance figure of the ship rule for a new default model.

Per item, does the instruction's stance rank its matching passage above the opposite one (1/0)?
Items come from four sets, each scored by its own task's code with its own held-out rule:

- SciFact stance (scifact_stance.py): one item per (claim, abstract) record: the abstract scores
  higher under the matching instruction than under the mismatching one. Records whose claim a
  training file holds are left out with ``--exclude-seen`` (the default trained on SciFact
  stance records).
- Climate-FEVER, PERSPECTRUM and NLI stance (steering.py): one item per (claim, instruction):
  the asked stance's sentence above the other stance's. Held out by the training builders' split
  (PERSPECTRUM: the data set's test split). Where a claim has several sentences of a stance, one
  is chosen per stance (seeded per claim, ``one_per_stance``), so every item is one comparison
  and scores 1 or 0; these per-set figures can differ from the standalone tasks, which average
  over every (wanted, unwanted) pair.

The items pool into one list (``pairwise_accuracy``) with a bootstrap interval, split per set
(``pairwise_accuracy_<set>``) and per label (``pairwise_accuracy_support`` / ``_refute``). Item
ids (``scifact:<claim>/<abstract>:support``, ``climate-fever:<claim>:refute``, ...) are fixed by
the data and limits, never by the encoder, and ``instemb-rag compare`` pairs two encoders' pooled
results on them. ``max_queries`` caps the items of each set (whole claims: two items each).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .data import EvalDataError
from .steering import one_per_stance, score_stance_groups, stance_groups_with_both, stance_set

POOLED_SETS = ("scifact", "climate-fever", "perspectrum", "nli")
LABELS = ("support", "refute")


def split_name(set_name: str) -> str:
    """The per-set metric: ``pairwise_accuracy_climate_fever``, ..."""
    return "pairwise_accuracy_" + set_name.replace("-", "_")


def _scifact_items(context, data_root: Path, max_items: int | None):
    from .scifact_stance import pairwise_items

    return pairwise_items(context, data_root / "scifact" / "stance.jsonl", max_items)


def _group_items(context, data_root: Path, set_name: str, max_items: int | None):
    """A group set's ids, 1/0 values and notes: one sentence per stance, whole groups up to the cap."""
    chosen = stance_set(set_name)
    by_group, texts, notes = chosen.load(context, data_root)
    by_group = one_per_stance(by_group, context.seed)
    max_groups = None if max_items is None else max(1, max_items // 2)
    groups, note = stance_groups_with_both(context, by_group, max_groups, chosen.what)
    scores = score_stance_groups(context, by_group, texts, groups, chosen.phrasings)
    return scores.ids(set_name), scores.values, notes + [note]


def pooled_items(context, data_root: Path, max_items: int | None) -> tuple[list[str], list[float], list[str]]:
    """Every set's items in POOLED_SETS order: ids, 1/0 values, notes (each prefixed by its set)."""
    if context.steering_split != "heldout":
        raise EvalDataError(
            "stance-pooled is a dev figure on held-out items only; for a fit diagnostic run "
            "climate-fever-stance, perspectrum-stance and nli-stance with --split train."
        )
    ids: list[str] = []
    values: list[float] = []
    notes: list[str] = []
    for set_name in POOLED_SETS:
        if set_name == "scifact":
            set_ids, set_values, set_notes = _scifact_items(context, data_root, max_items)
        else:
            set_ids, set_values, set_notes = _group_items(context, data_root, set_name, max_items)
        ids += set_ids
        values += set_values
        notes += [f"{set_name}: {note}" for note in set_notes]
    return ids, values, notes


def pooled_splits(ids: list[str], values: list[float]) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """Per-item values and ids of the pooled figure, of each set and of each label."""
    per_item = {"pairwise_accuracy": list(values)}
    item_ids = {"pairwise_accuracy": list(ids)}
    selections = [(split_name(name), lambda item, name=name: item.startswith(name + ":")) for name in POOLED_SETS]
    selections += [
        (f"pairwise_accuracy_{label}", lambda item, label=label: item.endswith(":" + label)) for label in LABELS
    ]
    for metric, belongs in selections:
        kept = [index for index, item in enumerate(ids) if belongs(item)]
        if kept:
            per_item[metric] = [values[index] for index in kept]
            item_ids[metric] = [ids[index] for index in kept]
    return per_item, item_ids


def run_stance_pooled(context, data_root: Path, max_queries: int | None):
    """The task: metrics (each a mean of its per-item list), counts, notes, per-item values, ids."""
    ids, values, notes = pooled_items(context, data_root, max_queries)
    if len(set(ids)) != len(ids):
        raise EvalDataError("stance-pooled built two items with one id; report this with the data set versions.")
    per_item, item_ids = pooled_splits(ids, values)
    metrics = {metric: float(np.mean(scores)) for metric, scores in per_item.items()}
    counts = {"queries": len(ids), **{name: len(per_item.get(split_name(name), [])) for name in POOLED_SETS}}
    return metrics, counts, notes, per_item, item_ids
