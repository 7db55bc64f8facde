"""The one file hasher: SHA-256 of a file's bytes, streamed in 4 MB blocks; and the one cache of
fingerprints taken from files, remembered by the files' identity.

Hashing the default LLM's weights (half a gigabyte) costs most of a second on every start, so a
fingerprint taken from files is remembered in ``$INSTEMB_HOME/fingerprint_cache.json`` under a key
made of what the caller says decides it besides the files' bytes (its ``context``) and each file's
identity: resolved path, size, mtime_ns, ctime_ns, inode and device. A file rewritten, replaced or
moved changes its identity, so the fingerprint is taken afresh. The cache is written atomically
under a lock; a file that is not what this module writes (damaged, truncated, another format) is
ignored and rewritten at the next store, and an entry is used only when it names the same files
with the same identities. A file changed less than ``SETTLED_SECONDS`` ago is not remembered:
a write within the same clock tick could leave its mtime as it was (git's "racy" case).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

BLOCK_BYTES = 1 << 22
FINGERPRINT_CACHE_FILE = "fingerprint_cache.json"
CACHE_FORMAT = 1
MAX_ENTRIES = 256  # oldest dropped first: a few per model and setting, so this is many models
SETTLED_SECONDS = 2.0
_FINGERPRINT = re.compile(r"[0-9a-z-]{16,128}")


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


def file_identity(path: str | os.PathLike) -> list:
    """What changes when a file is rewritten, replaced or moved: [resolved path, size, mtime_ns,
    ctime_ns, inode, device]."""
    resolved = Path(path).resolve()
    status = resolved.stat()
    return [str(resolved), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev]


class FingerprintCache:
    """Fingerprints taken from files, by the files' identity and the caller's context (module
    docstring). ``path``: the cache file (default: under $INSTEMB_HOME)."""

    def __init__(self, path: str | os.PathLike | None = None):
        if path is None:
            from .paths import instemb_home

            path = instemb_home() / FINGERPRINT_CACHE_FILE
        self.path = Path(path)

    def fingerprint(self, files: Sequence[str | os.PathLike], context: dict, compute: Callable[[], str]) -> str:
        """The remembered fingerprint of ``files`` under ``context``, else ``compute()``'s, remembered."""
        identities = [file_identity(path) for path in files]
        key = self.key(identities, context)
        remembered = self.lookup(key, identities)
        if remembered is not None:
            return remembered
        fingerprint = compute()
        if settled(identities):
            self.store(key, identities, fingerprint)
        return fingerprint

    @staticmethod
    def key(identities: list[list], context: dict) -> str:
        material = json.dumps({"context": context, "files": identities}, sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()

    def lookup(self, key: str, identities: list[list]) -> str | None:
        entry = self._entries().get(key)
        if not isinstance(entry, dict) or entry.get("files") != identities:
            return None
        fingerprint = entry.get("fingerprint")
        return fingerprint if isinstance(fingerprint, str) and _FINGERPRINT.fullmatch(fingerprint) else None

    def store(self, key: str, identities: list[list], fingerprint: str) -> None:
        """Remember one fingerprint; a cache that cannot be written (a read-only home) costs the
        next start a hash, nothing else."""
        from filelock import FileLock

        from .atomic import write_text_atomically

        try:
            with FileLock(str(self.path) + ".lock", timeout=10):
                entries = self._entries()
                entries.pop(key, None)
                entries[key] = {"fingerprint": fingerprint, "files": identities}
                kept = dict(list(entries.items())[-MAX_ENTRIES:])
                write_text_atomically(self.path, json.dumps({"format": CACHE_FORMAT, "entries": kept}, indent=1))
        except (OSError, TimeoutError):
            pass

    def _entries(self) -> dict:
        """The cache's entries; {} for a missing file or one this module did not write."""
        try:
            content = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(content, dict) or content.get("format") != CACHE_FORMAT:
            return {}
        entries = content.get("entries")
        return dict(entries) if isinstance(entries, dict) else {}


def settled(identities: list[list], now_ns: int | None = None) -> bool:
    """Whether every file was last changed (mtime and ctime) at least SETTLED_SECONDS ago."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    newest = max((max(identity[2], identity[3]) for identity in identities), default=0)
    return now_ns - newest >= SETTLED_SECONDS * 1e9


def cached_fingerprint(files: Sequence[str | os.PathLike], context: dict, compute: Callable[[], str]) -> str:
    """``FingerprintCache().fingerprint``: the cache under $INSTEMB_HOME."""
    return FingerprintCache().fingerprint(files, context, compute)
