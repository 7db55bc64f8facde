"""Training records: one JSON object per line, ``{"text", "instruction", "output"}``.

``text`` is the input text, ``instruction`` what the user asks about it (may be null), and
``output`` the answer a generating model would give; the teacher reads its first L tokens.
Optional ``negative_instruction``: an instruction under which ``output`` is *not* the answer
for this text (for example the opposite stance); the text under it becomes a hard negative in
the contrastive loss, which teaches the encoder that the instruction's wording matters.
Optional ``negative_outputs``: document-side hard negatives, texts a retriever must rank below
``output`` for this query (the evidence of the opposite stance, a contradicting sentence).
Optional ``group``: records sharing a group are put in the same micro-batch (the same claim under
two stances, one disease under several facets), so each is the other's hard negative.
"""

from __future__ import annotations

import json
import os
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Iterable

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..atomic import write_text_atomically
from ..errors import InstEmbError
from ..jsonl import jsonl_lines


class RecordError(InstEmbError):
    """A training file holds a record that cannot be used (the message names file and line)."""


class TrainingRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    instruction: str | None = None
    output: str
    source: str = ""  # provenance, e.g. "pubmedqa:21645374"; its set (source_set) can pick the distilled records
    negative_instruction: str | None = None
    negative_outputs: tuple[str, ...] = ()
    group: str | None = None

    @field_validator("text", "output")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a non-empty string")
        return value

    @field_validator("negative_outputs")
    @classmethod
    def _no_blank_negatives(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not item.strip() for item in value):
            raise ValueError("must hold non-empty strings")
        return value

    @field_validator("instruction", "negative_instruction", "group")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value if value and value.strip() else None


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(piece) for piece in error["loc"]) or "record"
        parts.append(f"field '{field}': {error['msg']}")
    return "; ".join(parts)


def _parse_record(raw: bytes, path: Path, number: int) -> TrainingRecord:
    try:
        parsed = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = f"{exc.msg}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise RecordError(f"{path}, line {number}: not valid JSON ({detail}).") from exc
    if not isinstance(parsed, dict):
        raise RecordError(
            f"{path}, line {number}: expected a JSON object with 'text', 'instruction', 'output', "
            f"got {type(parsed).__name__}."
        )
    try:
        return TrainingRecord.model_validate(parsed)
    except ValidationError as exc:
        raise RecordError(
            f"{path}, line {number}: {_describe(exc)}. Each line needs 'text' and 'output' "
            "(non-empty strings) and optionally 'instruction', 'source', 'negative_instruction', "
            "'negative_outputs' (a list of strings) and 'group'."
        ) from exc


def _scan(path: Path) -> Iterator[tuple[int, int, TrainingRecord]]:
    """(line number, byte offset, record) of every line, validated; the first bad line raises."""
    if not path.is_file():
        raise RecordError(f"Training file {path} not found. Build one with `instemb-rag build-data --out DIR`.")
    found = False
    for number, offset, raw in jsonl_lines(path, RecordError):
        found = True
        yield number, offset, _parse_record(raw, path, number)
    if not found:
        raise RecordError(f"{path} holds no records.")


def source_set(record: TrainingRecord) -> str:
    """The set a record was built from: its ``source`` up to the first ":" ("medquad_facets" for
    "medquad_facets:0001:symptoms"); a record without a source belongs to the set ""."""
    return record.source.split(":", 1)[0]


def read_records(path: str | os.PathLike) -> list[TrainingRecord]:
    """Read and validate a JSONL file; the first bad line raises RecordError with its number."""
    return [record for _, _, record in _scan(Path(path))]


class RecordFile(Sequence[TrainingRecord]):
    """The records of a JSONL file, read from disk when indexed.

    One streaming pass validates every line and keeps only each line's byte offset, its
    ``group`` and whether it carries hard negatives (and a count per source set), so a file of a
    million records costs a few megabytes of memory; ``records[i]`` reads and parses line i again
    (what a training step needs is a micro-batch of them)."""

    def __init__(self, path: str | os.PathLike):
        self._handle = None  # opened on the first read
        self.path = Path(path)
        self._offsets = array("q")
        self.groups: list[str | None] = []
        self.negative_carriers = 0  # records with negative_instruction or negative_outputs
        self.source_sets: Counter[str] = Counter()  # records per source_set
        for _, offset, record in _scan(self.path):
            self._offsets.append(offset)
            self.groups.append(record.group)
            self.source_sets[source_set(record)] += 1
            self.negative_carriers += bool(record.negative_instruction or record.negative_outputs)

    def __len__(self) -> int:
        return len(self._offsets)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if self._handle is None:
            self._handle = open(self.path, "rb")
        self._handle.seek(self._offsets[index])
        return _parse_record(self._handle.readline(), self.path, index + 1)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __del__(self) -> None:
        self.close()


def open_records(path: str | os.PathLike) -> RecordFile:
    """A validated, lazily read view of a training file (see RecordFile)."""
    return RecordFile(path)


def _as_json(record: TrainingRecord) -> dict:
    fields = record.model_dump()
    # Files without the optional fields keep their old form.
    for optional in ("negative_instruction", "group"):
        if fields[optional] is None:
            del fields[optional]
    if not fields["negative_outputs"]:
        del fields["negative_outputs"]
    else:
        fields["negative_outputs"] = list(fields["negative_outputs"])
    return fields


def write_records(path: str | os.PathLike, records: Iterable[TrainingRecord]) -> int:
    """Write records as JSONL atomically (a crash never leaves a half-written file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_as_json(record), ensure_ascii=False) + "\n" for record in records]
    write_text_atomically(path, "".join(lines))
    return len(lines)
