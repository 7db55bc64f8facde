"""The order a geometry-distillation run reads its items in (the items: distill_items.py).

Batches keep a group's items together (a subject's passages and its instructed queries are
each other's hard negatives in the group loss), and so do a query and its positive passage; items
of similar length go together (length bucketing: little padding per batch). The order is a pure function of the seed and
the epoch, so a resumed run reads exactly the batches it would have read.
"""

from __future__ import annotations

import random

from ..datasets.embedding_items import DistillItem

BUCKET_WINDOW = 64  # batches whose units are sorted by length together before packing


def _unit_key(item: DistillItem) -> str:
    """Items sharing a key are batched together: a group, or a query with its positive passage."""
    if item.group is not None:
        return f"group:{item.group}"
    if item.role == "query" and item.positive is not None:
        return f"pair:{item.positive}"
    return f"pair:{item.id}"


def _units(items: list[DistillItem], batch_size: int) -> list[list[int]]:
    """Each key's items as one unit (split where it exceeds a batch), in first-seen order."""
    by_key: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_key.setdefault(_unit_key(item), []).append(index)
    return [
        members[start : start + batch_size]
        for members in by_key.values()
        for start in range(0, len(members), batch_size)
    ]


def epoch_batches(
    items: list[DistillItem], lengths: list[int], batch_size: int, seed: int, epoch: int
) -> list[list[int]]:
    """One epoch's batches: units shuffled, sorted by length within windows, packed, shuffled."""
    rng = random.Random(f"{seed}:{epoch}")
    units = _units(items, batch_size)
    rng.shuffle(units)
    window = batch_size * BUCKET_WINDOW
    batches: list[list[int]] = []
    current: list[int] = []
    for start in range(0, len(units), window):
        chunk = sorted(units[start : start + window], key=lambda unit: max(lengths[i] for i in unit))
        for unit in chunk:
            if len(current) + len(unit) > batch_size:
                batches.append(current)
                current = []
            current.extend(unit)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


class GeometryOrder:
    """Batch of any step: epochs follow one another, each in its own seeded order.

    Packing a shuffled epoch gives a slightly different number of batches each time, so a step
    is placed by walking the epochs' batch counts, not by one epoch's length.
    """

    def __init__(self, items: list[DistillItem], lengths: list[int], batch_size: int, seed: int):
        self.items, self.lengths, self.batch_size, self.seed = items, lengths, batch_size, seed
        self._epochs: dict[int, list[list[int]]] = {}
        self._counts: list[int] = []  # batches of epochs 0, 1, ... as far as computed
        self.per_epoch = self._count(0)  # epoch 0's batches: what a run reports as one epoch

    def _epoch(self, epoch: int) -> list[list[int]]:
        if epoch not in self._epochs:
            self._epochs = {epoch: epoch_batches(self.items, self.lengths, self.batch_size, self.seed, epoch)}
        return self._epochs[epoch]

    def _count(self, epoch: int) -> int:
        while len(self._counts) <= epoch:
            self._counts.append(len(self._epoch(len(self._counts))))
        return self._counts[epoch]

    def step(self, step: int) -> list[int]:
        epoch = 0
        while step >= self._count(epoch):
            step -= self._count(epoch)
            epoch += 1
        return self._epoch(epoch)[step]
