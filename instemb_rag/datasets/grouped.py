"""What every data-set builder shares: a record tagged with its split group, and reading the
source files of ``../shared/data`` with an error that says where the data was expected."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import InstEmbError
from ..jsonl import read_jsonl
from .records import TrainingRecord


@dataclass(frozen=True)
class GroupedRecord:
    group: str  # records sharing a group land on the same side of the train/held-out split
    record: TrainingRecord


def read_source_jsonl(path: Path) -> Iterator[dict]:
    for _, row in read_jsonl(path):
        yield row


def require_files(folder: Path, *names: str) -> None:
    for name in names:
        if not (folder / name).is_file():
            raise InstEmbError(
                f"{folder / name} not found. The builders read the development data from "
                f"{folder.parent} (see its README.md); pass --data-root to point elsewhere."
            )
