"""The one JSON-lines reader: one JSON object per line, blank lines skipped, errors naming file and line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import InstEmbError


def read_jsonl(path: str | os.PathLike, error_type: type[Exception] = InstEmbError) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of ``path``.

    A missing file, a line that is not JSON, or a line that is not a JSON object raises
    ``error_type`` with ``path:line`` and what each line must be.
    """
    path = Path(path)
    if not path.is_file():
        raise error_type(f"{path} does not exist; expected a JSON-lines file there.")
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise error_type(f"{path}:{line_number}: not valid JSON ({error.msg}); each line must be one JSON "
                                 "object.") from None
            if not isinstance(record, dict):
                raise error_type(f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}.")
            yield line_number, record


def read_jsonl_objects(path: str | os.PathLike, limit: int | None = None,
                       error_type: type[Exception] = InstEmbError) -> list[dict]:
    """The objects of ``path`` (the first ``limit`` when given)."""
    rows = []
    for _, record in read_jsonl(path, error_type):
        if limit is not None and len(rows) >= limit:
            break
        rows.append(record)
    return rows
