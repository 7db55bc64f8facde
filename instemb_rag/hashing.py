"""The one file hasher: SHA-256 of a file's bytes, streamed in 4 MB blocks."""

from __future__ import annotations

import hashlib
import os

BLOCK_BYTES = 1 << 22


def update_from_file(digest, path: str | os.PathLike) -> None:
    """Feed the bytes of ``path`` into ``digest`` (any hashlib object)."""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK_BYTES), b""):
            digest.update(block)


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of the file's content."""
    digest = hashlib.sha256()
    update_from_file(digest, path)
    return digest.hexdigest()
