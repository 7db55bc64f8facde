"""Which rows each step reads: one ``BatchOrder``, one packing mode per kind of row.

A step's batches are a pure function of (seed, epoch, step): epochs are laid end to end, each
drawn from its own seeded generator, so a resumed run reads exactly the batches it would have read.
Rows that must meet (a group's records, a query and its positive passage) form one *unit*, kept in
one batch. Three modes, each with the generator and packing its runs have always used (the
batches of runs written before the modes shared this class are pinned by
tests/training/test_batch_order.py):

- ``BatchOrder.records``: the look-ahead trainer's records, ``micro_batches_per_step``
  micro-batches a step; units of at most half a micro-batch, an epoch a ``torch.randperm`` of
  units seeded ``seed + epoch``, packed (optionally bucketed by length, training.bucket_by_length);
- ``BatchOrder.items``: a geometry run's embedding items; units by group or query/positive pair,
  shuffled by ``random.Random(f"{seed}:{epoch}")``, sorted by length within windows, packed, shuffled;
- ``BatchOrder.contrast``: a geometry run's instruction-contrast records; groups shuffled by
  ``random.Random(f"{seed}:contrast:{epoch}")`` and cut in batches of a fixed size (an epoch's
  last partial batch left out).

Packing a shuffled epoch may give a different number of batches each time, so a position is
placed by walking the epochs' batch counts, not by one epoch's length.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from ..datasets.embedding_items import EmbeddingItem
from ..datasets.records import TrainingRecord

__all__ = ["BUCKET_MICRO_BATCHES", "BUCKET_WINDOW", "BatchOrder", "item_epoch", "record_lengths"]

# records mode: a bucket spans about this many micro-batches of units: its units are sorted by
# length before packing, so a batch's rows have similar lengths; buckets (not the whole epoch) are
# sorted so that which records meet in a batch still changes from epoch to epoch.
BUCKET_MICRO_BATCHES = 32
# items mode: batches whose units are sorted by length together before packing
BUCKET_WINDOW = 64

Epoch = list[list[int]]


class BatchOrder:
    """The batches of any step, from ``epoch(n)``: the n-th epoch's batches (a pure function of n)."""

    def __init__(self, epoch: Callable[[int], Epoch], micro_batches_per_step: int | None = None, kept_epochs: int = 2):
        """``micro_batches_per_step``: None when a step reads one batch, else how many micro-batches."""
        self._make, self.per_step, self._kept = epoch, micro_batches_per_step, kept_epochs
        self._epochs: dict[int, Epoch] = {}
        self._counts: list[int] = []  # batches of epochs 0, 1, ... as far as computed
        self.units: list[list[int]] = []  # the rows kept together (records mode sets them)

    # ------------------------------------------------------------------------ the modes
    @classmethod
    def records(
        cls,
        groups: list[str | None],
        batch_size: int,
        micro_batches_per_step: int,
        seed: int,
        lengths: Sequence[int] | None = None,
    ) -> BatchOrder:
        """Micro-batches of record indices; ``step(n)`` is the list of step n's micro-batches."""
        units = _record_units(groups, max(1, batch_size // 2))

        def epoch(number: int) -> Epoch:
            generator = torch.Generator().manual_seed(seed + number)
            order = torch.randperm(len(units), generator=generator).tolist()
            shuffled = [units[i] for i in order]
            if lengths is None:
                return _pack(shuffled, batch_size)
            return _bucketed(shuffled, lengths, batch_size, generator)

        order = cls(epoch, micro_batches_per_step)
        order.units = units
        return order

    @classmethod
    def items(cls, items: list[EmbeddingItem], lengths: list[int], batch_size: int, seed: int) -> BatchOrder:
        """Batches of item indices; ``step(n)`` is step n's batch."""
        return cls(lambda number: item_epoch(items, lengths, batch_size, seed, number))

    @classmethod
    def contrast(cls, records: list[TrainingRecord], batch_size: int, seed: int) -> BatchOrder:
        """Batches of record indices, ``len(records) // batch_size`` an epoch; ``step(n)`` is one batch."""
        units: dict[str, list[int]] = {}
        for index, record in enumerate(records):
            units.setdefault(record.group or record.source or record.text, []).append(index)
        grouped = list(units.values())
        per_epoch = len(records) // batch_size

        def epoch(number: int) -> Epoch:
            shuffled = list(grouped)
            random.Random(f"{seed}:contrast:{number}").shuffle(shuffled)
            flat = [index for unit in shuffled for index in unit]
            return [flat[n * batch_size : (n + 1) * batch_size] for n in range(per_epoch)]

        return cls(epoch)

    # ------------------------------------------------------------------------ reading it
    def epoch(self, number: int) -> Epoch:
        if number not in self._epochs:
            if len(self._epochs) >= self._kept:
                self._epochs.pop(next(iter(self._epochs)))
            self._epochs[number] = self._make(number)
        return self._epochs[number]

    def _count(self, number: int) -> int:
        while len(self._counts) <= number:
            self._counts.append(len(self.epoch(len(self._counts))))
        return self._counts[number]

    @property
    def per_epoch(self) -> int:
        """Epoch 0's batches: what a run reports as one epoch."""
        return self._count(0)

    def batch(self, position: int) -> list[int]:
        """The batch at ``position`` counting from the first batch of epoch 0."""
        number = 0
        while position >= self._count(number):
            position -= self._count(number)
            number += 1
        return self.epoch(number)[position]

    def step(self, step: int):
        """Step ``step``'s batch, or the list of its micro-batches (records mode)."""
        if self.per_step is None:
            return self.batch(step)
        return [self.batch(p) for p in range(step * self.per_step, (step + 1) * self.per_step)]


# ---------------------------------------------------------------------------- records mode
def _record_units(groups: list[str | None], largest: int) -> list[list[int]]:
    """Records sharing a group as units of at most ``largest`` (so they meet as hard negatives);
    records without a group are units of one."""
    members: dict[str, list[int]] = {}
    units: list[list[int]] = []
    for index, group in enumerate(groups):
        if group is None:
            units.append([index])
        else:
            members.setdefault(group, []).append(index)
    for indices in members.values():
        units += [indices[start : start + largest] for start in range(0, len(indices), largest)]
    return units


def _pack(units: list[list[int]], size: int, look_ahead: int = 16) -> Epoch:
    """Fill micro-batches in unit order; a unit that does not fit waits for the next batch while
    up to ``look_ahead`` later units are tried, so batches come out full but for the epoch's end."""
    waiting = list(units)
    batches: Epoch = []
    while waiting:
        batch: list[int] = []
        position = 0
        while position < len(waiting) and position < look_ahead and len(batch) < size:
            if len(batch) + len(waiting[position]) <= size:
                batch += waiting.pop(position)
            else:
                position += 1
        batches.append(batch)
    return batches


def _bucketed(units: list[list[int]], lengths: Sequence[int], size: int, generator: torch.Generator) -> Epoch:
    """Units sorted by length within each bucket, packed in that order (one pass, so only the
    epoch's last batch can come out short), then the batches shuffled."""
    bucket_records = BUCKET_MICRO_BATCHES * size
    ordered: list[list[int]] = []
    bucket: list[list[int]] = []
    filled = 0
    for unit in units + [[]]:  # the empty sentinel flushes the last bucket
        if unit:
            bucket.append(unit)
            filled += len(unit)
        if filled >= bucket_records or (not unit and bucket):
            ordered += sorted(bucket, key=lambda members: max(lengths[i] for i in members))
            bucket, filled = [], 0
    batches = _pack(ordered, size)
    shuffle = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffle]


def record_lengths(records: Sequence[TrainingRecord]) -> list[int]:
    """A length per record for bucketing: the characters its passes read (text, instruction, answer).
    Characters, not tokens, so ordering a large file costs one read and no tokenizer."""
    return [len(r.text) + len(r.instruction or "") + len(r.output) for r in records]


# ---------------------------------------------------------------------------- items mode
def _item_unit_key(item: EmbeddingItem) -> str:
    """Items sharing a key are batched together: a group, or a query with its positive passage."""
    if item.group is not None:
        return f"group:{item.group}"
    if item.role == "query" and item.positive is not None:
        return f"pair:{item.positive}"
    return f"pair:{item.id}"


def _item_units(items: list[EmbeddingItem], batch_size: int) -> list[list[int]]:
    """Each key's items as one unit (split where it exceeds a batch), in first-seen order."""
    by_key: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_key.setdefault(_item_unit_key(item), []).append(index)
    return [
        members[start : start + batch_size]
        for members in by_key.values()
        for start in range(0, len(members), batch_size)
    ]


def item_epoch(items: list[EmbeddingItem], lengths: list[int], batch_size: int, seed: int, epoch: int) -> Epoch:
    """One epoch's batches: units shuffled, sorted by length within windows, packed, shuffled."""
    rng = random.Random(f"{seed}:{epoch}")
    units = _item_units(items, batch_size)
    rng.shuffle(units)
    window = batch_size * BUCKET_WINDOW
    batches: Epoch = []
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
