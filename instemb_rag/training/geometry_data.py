"""The items a geometry-distillation run reads, and the order it reads them in.

An item is one text the student embeds: a query (with its instruction, or none) or a passage,
one JSON object per line of the texts file (training/distill_texts.py writes it):

    {"id": "...", "role": "query" | "passage", "text": "...", "instruction": "..." | null,
     "group": "..." | null, "positive": "<a passage's id>" | null, "source": "..."}

Batches keep a group's items together (a subject's passages and its instructed queries are
each other's hard negatives in the group loss), and a query with its positive passage and put items of similar length together
(length bucketing: little padding per batch). The order is a pure function of the seed and
the epoch, so a resumed run reads exactly the batches it would have read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from ..errors import InstEmbError
from ..jsonl import read_jsonl

ROLES = ("query", "passage")
BUCKET_WINDOW = 64  # batches whose units are sorted by length together before packing


@dataclass(frozen=True)
class DistillItem:
    id: str
    role: str
    text: str
    instruction: str | None
    group: str | None
    positive: str | None

    @property
    def student_input(self) -> tuple[str, str | None]:
        return self.text, self.instruction


def _item(raw: dict, where: str) -> DistillItem:
    for name in ("id", "role", "text"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise InstEmbError(f"{where}: field '{name}' must be a non-empty string.")
    if raw["role"] not in ROLES:
        raise InstEmbError(f"{where}: role must be one of {list(ROLES)}, not '{raw['role']}'.")
    for name in ("instruction", "group", "positive"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise InstEmbError(f"{where}: field '{name}' must be a string or null.")
    return DistillItem(
        raw["id"], raw["role"], raw["text"], raw.get("instruction") or None, raw.get("group"), raw.get("positive")
    )


def read_items(path: str | Path, max_items: int | None = None) -> list[DistillItem]:
    """Every item of the texts file (the first ``max_items``), checked: unique ids, known positives."""
    path = Path(path)
    if not path.is_file():
        raise InstEmbError(
            f"Distillation texts {path} not found. Build them with `instemb-rag train build-distill-texts` "
            "or point geometry.texts_file at an existing file."
        )
    items: list[DistillItem] = []
    for line_number, raw in read_jsonl(path):
        if max_items is not None and len(items) >= max_items:
            break
        items.append(_item(raw, f"{path} line {line_number}"))
    if not items:
        raise InstEmbError(f"{path} holds no items.")
    ids = {item.id for item in items}
    if len(ids) != len(items):
        raise InstEmbError(f"{path}: item ids must be unique ({len(items) - len(ids)} repeated).")
    return [item if item.positive in ids else _without_positive(item) for item in items]


def _without_positive(item: DistillItem) -> DistillItem:
    # A positive cut off by max_items (or never written) leaves the query to the teacher terms.
    return DistillItem(item.id, item.role, item.text, item.instruction, item.group, None)


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
    """Batch of any step: epochs follow one another, each in its own seeded order."""

    def __init__(self, items: list[DistillItem], lengths: list[int], batch_size: int, seed: int):
        self.items, self.lengths, self.batch_size, self.seed = items, lengths, batch_size, seed
        self._epochs: dict[int, list[list[int]]] = {}
        self.per_epoch = len(self._epoch(0))

    def _epoch(self, epoch: int) -> list[list[int]]:
        if epoch not in self._epochs:
            self._epochs = {epoch: epoch_batches(self.items, self.lengths, self.batch_size, self.seed, epoch)}
        return self._epochs[epoch]

    def step(self, step: int) -> list[int]:
        return self._epoch(step // self.per_epoch)[step % self.per_epoch]
