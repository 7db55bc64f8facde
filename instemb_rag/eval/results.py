"""The JSON-able result of one evaluation, shared by the CLI, the API and the ablation report."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..atomic import write_text_atomically
from ..encoder.protocol import Encoder

RESULT_FORMAT_VERSION = 1


@dataclass
class TaskResult:
    task: str
    kind: str  # retrieval | paired-instruction | steering | sts
    metrics: dict[str, float]
    main_metric: str
    encoder: dict  # fingerprint, base model, pooling, look-ahead length, label
    counts: dict[str, int]  # queries / documents / pairs actually used
    limits: dict  # max_queries, max_docs, seed as requested
    instruction: str | None = None
    notes: list[str] = field(default_factory=list)
    corpus_from_cache: bool = False
    seconds: float = 0.0
    format_version: int = RESULT_FORMAT_VERSION
    intervals: dict[str, list[float]] = field(default_factory=dict)  # metric -> bootstrap 95 % [low, high]
    # metric -> one value per item (query, stance record, focus), in an order the data and limits
    # fix, so two encoders' results of the same task and limits pair item by item (eval/compare.py).
    per_item: dict[str, list[float]] = field(default_factory=dict)
    # metric -> the id of each per-item value, same order (stance and steering tasks): compare pairs
    # on them, and items sharing a group (one claim under both stances) resample together.
    item_ids: dict[str, list[str]] = field(default_factory=dict)

    @property
    def main_score(self) -> float:
        return self.metrics[self.main_metric]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TaskResult:
        return cls(**data)


STANCE_SUFFIXES = (":support", ":refute")


def item_cluster(item_id: str) -> str:
    """The group an item belongs to: a stance item's id less its label (``climate-fever:c7:refute``
    -> ``climate-fever:c7``: the same claim and passages under the other instruction); any other
    item is its own group."""
    for suffix in STANCE_SUFFIXES:
        if item_id.endswith(suffix):
            return item_id[: -len(suffix)]
    return item_id


def item_clusters(item_ids: dict[str, list[str]]) -> dict[str, list[str]]:
    """metric -> the cluster of each item, for the metrics whose items name them."""
    return {metric: [item_cluster(item) for item in ids] for metric, ids in item_ids.items()}


def encoder_description(encoder: Encoder, label: str | None = None) -> dict:
    """Identity of the encoder behind a result; any object with the encoder contract works."""
    pooling = getattr(getattr(encoder, "pooling", None), "mode", None)
    lookahead = getattr(encoder, "lookahead_length", None)
    backbone = getattr(encoder, "backbone", None)
    return {
        "label": label
        or getattr(encoder, "label", None)
        or (f"{pooling}, L={lookahead}" if pooling else type(encoder).__name__),
        "fingerprint": encoder.fingerprint,
        "base_model": str(getattr(backbone, "reference", "")),
        "pooling": pooling,
        "lookahead_length": lookahead,
        "trained": bool(getattr(encoder, "training_info", None)),
    }


def write_results_json(results: list[dict], path: str | Path, extra: dict | None = None) -> Path:
    """Write a list of result dicts atomically (a crash never leaves a truncated file).

    ``extra``: further top-level sections beside ``results`` (``facet_groups``: per-item scores,
    splits and paired comparisons, facet_runs.py)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format_version": RESULT_FORMAT_VERSION, "results": results, **(extra or {})}
    write_text_atomically(path, json.dumps(document, indent=2))
    return path
