"""The one JSON-lines reader: one JSON object per line, blank lines skipped, errors naming file and line.

``read_jsonl`` streams a file once; ``read_jsonl_with_offsets`` also yields each line's byte
offset, so a caller can keep only offsets (8 bytes a line) and read an object again later with
``read_jsonl_at``: a million-record training file is validated in one pass and never held whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import InstEmbError


def _parse_line(raw: bytes, path: Path, line_number: int, error_type: type[Exception]) -> dict:
    try:
        record = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else "not UTF-8"
        raise error_type(
            f"{path}:{line_number}: not valid JSON ({reason}); each line must be one JSON object."
        ) from None
    if not isinstance(record, dict):
        raise error_type(f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}.")
    return record


def jsonl_lines(
    path: str | os.PathLike, error_type: type[Exception] = InstEmbError
) -> Iterator[tuple[int, int, bytes]]:
    """Yield (line number, byte offset, raw line) for each non-blank line, streamed (for readers
    that word their own errors, such as the training records)."""
    path = Path(path)
    if not path.is_file():
        raise error_type(f"{path} does not exist; expected a JSON-lines file there.")
    with path.open("rb") as handle:
        offset = 0
        for line_number, raw in enumerate(handle, start=1):
            line_offset, offset = offset, offset + len(raw)
            if raw.strip():
                yield line_number, line_offset, raw


def read_jsonl_with_offsets(
    path: str | os.PathLike, error_type: type[Exception] = InstEmbError
) -> Iterator[tuple[int, int, dict]]:
    """Yield (line number, byte offset of the line, object) for each non-blank line of ``path``."""
    for line_number, offset, raw in jsonl_lines(path, error_type):
        yield line_number, offset, _parse_line(raw, Path(path), line_number, error_type)


def read_jsonl(path: str | os.PathLike, error_type: type[Exception] = InstEmbError) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of ``path``.

    A missing file, a line that is not JSON, or a line that is not a JSON object raises
    ``error_type`` with ``path:line`` and what each line must be.
    """
    for line_number, _, record in read_jsonl_with_offsets(path, error_type):
        yield line_number, record


def read_jsonl_at(
    handle: BinaryIO, offset: int, path: str | os.PathLike = "<jsonl>", error_type: type[Exception] = InstEmbError
) -> dict:
    """The object on the line starting at ``offset`` of an open binary ``handle`` (an offset
    from ``read_jsonl_with_offsets``)."""
    handle.seek(offset)
    return _parse_line(handle.readline(), Path(path), 0, error_type)


def read_jsonl_objects(
    path: str | os.PathLike, limit: int | None = None, error_type: type[Exception] = InstEmbError
) -> list[dict]:
    """The objects of ``path`` (the first ``limit`` when given)."""
    rows = []
    for _, record in read_jsonl(path, error_type):
        if limit is not None and len(rows) >= limit:
            break
        rows.append(record)
    return rows
