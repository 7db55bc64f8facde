"""The distillation-items format: its one item class, its writer and its checked reader.

An item is one text the student embeds: a query (with its instruction, or none) or a passage,
one JSON object per line (distill_texts.py builds the file, geometry.py trains on it):

    {"id": "...", "role": "query" | "passage", "text": "...", "instruction": "..." | null,
     "group": "..." | null, "positive": "<a passage's id>" | null, "source": "..."}
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..atomic import write_text_atomically
from ..errors import InstEmbError
from ..jsonl import read_jsonl

ROLES = ("query", "passage")
WRITTEN_FIELDS = ("id", "role", "text", "instruction", "group", "positive", "source")  # one line's keys, in order


@dataclass(frozen=True)
class EmbeddingItem:
    id: str
    role: str  # "query" | "passage"
    text: str
    instruction: str | None = None
    group: str | None = None  # one subject: its queries and passages are each other's hard negatives
    positive: str | None = None  # a query's labelled passage (its id); the instruction does not change it
    source: str | None = None  # the data set it came from
    # The builder's unit (items kept together under a cap): not part of the format, never written.
    unit: str = field(default="", compare=False)

    @property
    def student_input(self) -> tuple[str, str | None]:
        return self.text, self.instruction

    def as_json(self) -> dict:
        return {name: getattr(self, name) for name in WRITTEN_FIELDS}


def write_items(path: Path, items: list[EmbeddingItem]) -> None:
    """One item a line, written aside and renamed into place; ids must be unique."""
    repeated = [key for key, count in Counter(item.id for item in items).items() if count > 1]
    if repeated:  # a reader's bug: a positive would point at two passages
        raise ValueError(f"{len(repeated)} item ids occur twice (e.g. {repeated[:3]}); ids must be unique.")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, "".join(json.dumps(item.as_json(), ensure_ascii=False) + "\n" for item in items))


def _item(raw: dict, where: str) -> EmbeddingItem:
    for name in ("id", "role", "text"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise InstEmbError(f"{where}: field '{name}' must be a non-empty string.")
    if raw["role"] not in ROLES:
        raise InstEmbError(f"{where}: role must be one of {list(ROLES)}, not '{raw['role']}'.")
    for name in ("instruction", "group", "positive", "source"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise InstEmbError(f"{where}: field '{name}' must be a string or null.")
    return EmbeddingItem(
        raw["id"],
        raw["role"],
        raw["text"],
        raw.get("instruction") or None,
        raw.get("group"),
        raw.get("positive"),
        raw.get("source"),
    )


def read_items(path: str | Path, max_items: int | None = None) -> list[EmbeddingItem]:
    """Every item of the texts file (the first ``max_items``), checked: unique ids, known positives."""
    path = Path(path)
    if not path.is_file():
        raise InstEmbError(
            f"Distillation texts {path} not found. Build them with `instemb-rag build-distill-texts` "
            "or point the recipe's texts_file at an existing file."
        )
    items: list[EmbeddingItem] = []
    for line_number, raw in read_jsonl(path):
        if max_items is not None and len(items) >= max_items:
            break
        items.append(_item(raw, f"{path} line {line_number}"))
    if not items:
        raise InstEmbError(f"{path} holds no items.")
    ids = {item.id for item in items}
    if len(ids) != len(items):
        raise InstEmbError(f"{path}: item ids must be unique ({len(items) - len(ids)} repeated).")
    # A positive cut off by max_items (or never written) leaves the query to the teacher terms.
    return [item if item.positive in ids else replace(item, positive=None) for item in items]
