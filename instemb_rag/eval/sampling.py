"""Seeded sub-sampling for quick runs. Judged documents are always kept, so every query can still
find its relevant documents; only unjudged distractors are dropped (which inflates the scores)."""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

Item = TypeVar("Item")


def sample_in_order(items: Sequence[Item], limit: int | None, seed: int) -> list[Item]:
    """At most ``limit`` items chosen at random (seeded), kept in their original order."""
    items = list(items)
    if limit is None or limit >= len(items):
        return items
    if limit < 1:
        raise ValueError(f"A limit must be at least 1, got {limit}.")
    chosen = set(random.Random(seed).sample(range(len(items)), limit))
    return [item for position, item in enumerate(items) if position in chosen]


def subsample_corpus(
    doc_ids: Sequence[str], judged: set[str], max_docs: int | None, seed: int
) -> tuple[list[str], str | None]:
    """Every judged id plus a seeded sample of the rest, up to ``max_docs`` in all; and a note."""
    doc_ids = list(doc_ids)
    if max_docs is None or max_docs >= len(doc_ids):
        return doc_ids, None
    kept_judged = [doc_id for doc_id in doc_ids if doc_id in judged]
    others = [doc_id for doc_id in doc_ids if doc_id not in judged]
    room = max(0, max_docs - len(kept_judged))
    sampled = set(sample_in_order(others, room, seed)) if room else set()
    kept = [doc_id for doc_id in doc_ids if doc_id in judged or doc_id in sampled]
    note = (
        f"corpus sub-sampled: kept all {len(kept_judged)} judged documents + {len(sampled)} of "
        f"{len(others)} others (seed {seed}); {len(kept)} of {len(doc_ids)} documents, so scores "
        "are higher than on the full corpus"
    )
    if len(kept_judged) > max_docs:
        note += f" (max_docs={max_docs} is below the number of judged documents)"
    return kept, note
