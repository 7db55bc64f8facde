"""Atomic file writes: readers see the old file or the new one, never a partial one.

Every store, cache and report goes through here, so a kill at any moment leaves the previous
version intact. The temporary file lives in the target's folder (``os.replace`` is only atomic
within one file system) and gets the permissions a plain ``open`` would give it:
``tempfile.mkstemp`` creates files readable by their owner only, which would make shared
indexes and reports unreadable to anyone else.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def _default_file_mode() -> int:
    # The umask can only be read by setting it; set it straight back.
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomically(path: str | os.PathLike, write: Callable[[IO[bytes]], None]) -> Path:
    """Call ``write(stream)`` on a temporary binary file, fsync it, then rename it onto path."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, _default_file_mode())
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 text to path atomically."""
    return write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))
