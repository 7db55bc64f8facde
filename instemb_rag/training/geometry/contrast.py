"""Instruction-contrast records in a geometry run: the labels a sentence-encoder teacher cannot give.

A sentence encoder reads "find a study that supports" and "... that contradicts" almost alike
(mpnet with the instruction pasted in has no stance), so distilling its geometry alone wears away
what the starting LLM learned from contrast records: issue 33's candidates lost SciFact
stance and the NLI stance effect. This module feeds those records (datasets/records.py format,
e.g. an instruction-steering run's ``data/train.jsonl``) to the geometry run: each step reads a
few records, and losses/retrieval.py ranks each query against its own output, the other records'
outputs, and (from the output's side) the same text under its negative instruction, on the
embedding that ships.

The order is a pure function of the seed and the step (a resumed run reads the same records);
a group's records (one claim's two stances, one condition's facets) sit next to each other, so
they meet in a batch as each other's hard negatives.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import torch

from ...datasets.records import TrainingRecord, read_records, source_set
from ...errors import InstEmbError
from ...losses.retrieval import instruction_retrieval_loss
from ..batch_order import BatchOrder

Input = tuple[str, str | None]


def _unit_of(record: TrainingRecord) -> str:
    """Records sharing this are sampled (and batched, BatchOrder.contrast) together."""
    return record.group or record.source or record.text


def select_records(
    records: list[TrainingRecord], sets: list[str] | None, max_per_set: int | None, seed: int
) -> list[TrainingRecord]:
    """The records of ``sets`` (all when None), at most ``max_per_set`` a set, whole groups sampled."""
    by_set: dict[str, dict[str, list[TrainingRecord]]] = {}
    for record in records:
        name = source_set(record)
        if sets is None or name in sets:
            by_set.setdefault(name, {}).setdefault(_unit_of(record), []).append(record)
    missing = sorted(set(sets or []) - set(by_set))
    if missing:
        raise InstEmbError(
            f"geometry.contrast_sets names {missing}, which no record of the contrast file comes from; "
            f"the file holds {sorted({source_set(r) for r in records})}."
        )
    chosen: list[TrainingRecord] = []
    for name in sorted(by_set):
        units = list(by_set[name].values())
        random.Random(f"{seed}:{name}").shuffle(units)
        taken: list[TrainingRecord] = []
        for unit in units:
            if max_per_set is not None and len(taken) + len(unit) > max_per_set:
                continue
            taken.extend(unit)
        chosen.extend(taken)
    return chosen


class ContrastBatches:
    """The contrast records and the records of any step (``BatchOrder.contrast``: each epoch
    shuffles the groups and cuts batches of a fixed size)."""

    def __init__(self, records: list[TrainingRecord], batch_size: int, seed: int):
        if len(records) < batch_size:
            raise InstEmbError(
                f"the contrast records ({len(records)}) are fewer than geometry.contrast_batch_size "
                f"({batch_size}): add records or lower the batch size."
            )
        self.records, self.batch_size, self.seed = records, batch_size, seed
        self.order = BatchOrder.contrast(records, batch_size, seed)
        self.per_epoch = len(records) // batch_size  # the last partial batch of an epoch is left out

    def step(self, step: int) -> list[TrainingRecord]:
        return [self.records[i] for i in self.order.step(step)]

    def inputs(self) -> list[Input]:
        """Every input a step may embed (for the prefix cache), each once."""
        seen: dict[Input, None] = {}
        for record in self.records:
            seen[(record.text, record.instruction)] = None
            seen[(record.output, None)] = None
            if record.negative_instruction:
                seen[(record.text, record.negative_instruction)] = None
        return list(seen)


def load_contrast_order(path: str, sets: list[str] | None, max_per_set: int | None, batch_size: int, seed: int):
    records = select_records(read_records(path), sets, max_per_set, seed)
    return ContrastBatches(records, batch_size, seed)


def shared_pairs(records: list[TrainingRecord]) -> torch.Tensor:
    """[N, N] True where two records share their output or their query: not each other's negatives."""
    outputs = [record.output for record in records]
    queries = [(record.text, record.instruction) for record in records]
    return torch.tensor(
        [
            [outputs[i] == outputs[j] or queries[i] == queries[j] for j in range(len(records))]
            for i in range(len(records))
        ]
    )


def contrast_term(
    embed: Callable[[list[Input]], torch.Tensor], records: list[TrainingRecord], temperature: float
) -> torch.Tensor:
    """losses/retrieval.py's ranking loss on ``embed`` (the shipped embedding of a list of inputs)."""
    queries_here = {(r.text, r.instruction) for r in records}
    # A flipped query that is another record's query (NLI: one premise, two relations) is already
    # a negative for this output; twice, it would also sit in its own record's denominator.
    flipped = [
        (r.text, r.negative_instruction)
        for r in records
        if r.negative_instruction and (r.text, r.negative_instruction) not in queries_here
    ]
    inputs = [(r.text, r.instruction) for r in records] + [(r.output, None) for r in records] + flipped
    vectors = embed(inputs)
    count = len(records)
    queries, outputs, negative_queries = vectors[:count], vectors[count : 2 * count], vectors[2 * count :]
    shared = shared_pairs(records).to(vectors.device)
    return instruction_retrieval_loss(
        queries, outputs, shared, temperature, negative_queries=negative_queries if flipped else None
    )
