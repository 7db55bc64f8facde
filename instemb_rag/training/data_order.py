"""Which records each micro-batch holds: groups kept together, optionally bucketed by length."""

from __future__ import annotations

from typing import Sequence

import torch

from ..datasets.records import TrainingRecord

# A bucket spans about this many micro-batches of units: its units are sorted by length before
# packing, so a batch's rows have similar lengths; buckets (not the whole epoch) are sorted so
# that which records meet in a batch still changes from epoch to epoch.
BUCKET_MICRO_BATCHES = 32


class DataOrder:
    """Micro-batches of record indices per optimizer step.

    An epoch is a seeded permutation of *units*: records sharing a ``group`` (the same claim
    under two stances, one focus under several facets) form one unit of at most half a
    micro-batch, so they meet in one micro-batch and serve as each other's hard negatives;
    records without a group are units of one. Units are packed into micro-batches of at most
    ``batch_size`` and epochs are laid end to end, so the order is a pure function of
    (step, seed) and a resumed run sees the same batches.

    With ``lengths`` (one per record, training.bucket_by_length) the permuted units are sorted
    by length within buckets before packing, and the epoch's batches are shuffled after: rows of
    a batch have similar lengths (little padding), a group's records still share a batch."""

    def __init__(
        self,
        groups: list[str | None],
        batch_size: int,
        micro_batches_per_step: int,
        seed: int,
        lengths: Sequence[int] | None = None,
    ):
        self.batch_size, self.per_step, self.seed = batch_size, micro_batches_per_step, seed
        self.units = _units(groups, max(1, batch_size // 2))
        self.lengths = lengths
        self._epochs: list[list[list[int]]] = []

    def _epoch(self, epoch: int) -> list[list[int]]:
        while len(self._epochs) <= epoch:
            generator = torch.Generator().manual_seed(self.seed + len(self._epochs))
            order = torch.randperm(len(self.units), generator=generator).tolist()
            units = [self.units[i] for i in order]
            if self.lengths is None:
                self._epochs.append(_pack(units, self.batch_size))
            else:
                self._epochs.append(_bucketed(units, self.lengths, self.batch_size, generator))
        return self._epochs[epoch]

    def micro_batch(self, position: int) -> list[int]:
        epoch = 0
        while position >= len(self._epoch(epoch)):
            position -= len(self._epoch(epoch))
            epoch += 1
        return self._epoch(epoch)[position]

    def step(self, step: int) -> list[list[int]]:
        return [self.micro_batch(p) for p in range(step * self.per_step, (step + 1) * self.per_step)]


def _units(groups: list[str | None], largest: int) -> list[list[int]]:
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


def _pack(units: list[list[int]], size: int, look_ahead: int = 16) -> list[list[int]]:
    """Fill micro-batches in unit order; a unit that does not fit waits for the next batch while
    up to ``look_ahead`` later units are tried, so batches come out full but for the epoch's end."""
    waiting = list(units)
    batches: list[list[int]] = []
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


def _bucketed(units: list[list[int]], lengths: Sequence[int], size: int, generator: torch.Generator) -> list[list[int]]:
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
