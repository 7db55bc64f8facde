"""Finished batches kept across an interrupted `index` run (Ctrl-C, a kill, a crash).

The catalog commits a file once all its chunks are embedded, so a long file's finished batches
would be lost to an interruption. Every batch's vectors are also written here, keyed by the
SHA-256 of the chunk text under the document side's fingerprint (a chunk's vector depends on its
text and on what embeds documents, nothing else), one transaction per batch. The next run takes
each chunk it finds here instead of embedding it again and says how many it kept; a run that ends
with everything committed removes the file. A file of another document side is cleared on open.

This is a cache beside the catalog, never a source of truth: deleting it costs only the time to
embed those chunks again.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

PENDING_FILE = "pending-vectors.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors (text_sha256 TEXT PRIMARY KEY, vector BLOB NOT NULL);
"""


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class PendingVectors:
    def __init__(self, connection: sqlite3.Connection, path: Path, dimension: int):
        self.connection = connection
        self.path = path
        self.dimension = dimension
        self.kept_at_start = self.count()  # what an interrupted run left: said by the next run

    @classmethod
    def open(cls, index_dir: Path, fingerprint: str, dimension: int) -> PendingVectors:
        path = Path(index_dir) / PENDING_FILE
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.executescript(SCHEMA)
        row = connection.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        if row is None or row[0] != fingerprint:  # vectors of another document side: of no use
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("DELETE FROM vectors")
            connection.execute("INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)", (fingerprint,))
            connection.execute("COMMIT")
        return cls(connection, path, dimension)

    def count(self) -> int:
        return int(self.connection.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        keys = list(keys)
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            query = f"SELECT text_sha256, vector FROM vectors WHERE text_sha256 IN ({marks})"
            for key, blob in self.connection.execute(query, part):
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape[0] == self.dimension:
                    found[key] = vector
        return found

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """One finished batch, in one transaction (a kill keeps every batch written before it)."""
        rows = [(key, np.ascontiguousarray(vector, dtype=np.float32).tobytes()) for key, vector in zip(keys, vectors)]
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            self.connection.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()

    def remove(self) -> None:
        """Everything is committed: the file (and its WAL) goes."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def remove_pending(index_dir: Path) -> None:
    """A run with nothing to embed has nothing to go on from: an earlier run's pending vectors go."""
    for suffix in ("", "-wal", "-shm"):
        (Path(index_dir) / f"{PENDING_FILE}{suffix}").unlink(missing_ok=True)
