"""The SQLite catalog: the source of truth of an index folder.

It holds, per indexed file, its content hash, and per chunk its text, metadata and vector
(float32 blob). A chunk's id is derived from its content (``content_chunk_id``: file path,
position, text, metadata), so every path that embeds a chunk (this process, or a Ray worker
that writes the point to a Qdrant server before the driver commits) names it the same way,
whatever the order of the commits, and a retried write cannot duplicate it. Each file is replaced in one transaction that also bumps a generation
number, so a `kill -9` leaves every file either fully at its old or fully at its new
version. Vector stores (FAISS file, Qdrant) are derived from it and remember which
generation they reflect (``store_generation``); a mismatch tells the next run to repair.
WAL mode lets `query` read the last committed state while `index` writes.

One connection serves every thread (an app searching from a thread pool or from
``asyncio.to_thread``): it is opened with ``check_same_thread=False`` and every transaction holds
the catalog's lock, so two threads never interleave statements inside one snapshot. ``Index.search``
runs its vector store inside that read transaction, so the stores (a FAISS index rebuilt lazily,
the embedded Qdrant shard, a FAISS GPU copy) are searched one thread at a time as well. A
search's lock hold is a catalog read plus one vector lookup (milliseconds); the query is embedded
before it. A connection per thread would still need a lock for those stores, and one a thread
pool's worker opened could only be closed from that worker.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import fulltext
from .crash import crash_point

CATALOG_FILE = "catalog.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    chunk_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- content_chunk_id(): reused only by the same content (older
                                           -- catalogs hold sequential ids; both kinds coexist)
    path TEXT NOT NULL REFERENCES files(path),
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    extra TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_path ON chunks(path);
"""


ID_BITS = 53  # exact in a JSON number (JavaScript clients of `serve` read chunk ids too)


def content_chunk_id(source: str, position: int, text: str, extra: dict, salt: int = 0) -> int:
    """The id of a chunk, from its content: the same chunk gets the same id on every machine.

    Two different chunks sharing an id (about 1 in 10**4 for a million chunks) is handled by
    ``Catalog.replace_file``, which takes the next ``salt``; the caller sees the ids it got.
    """
    key = json.dumps([source, position, text, extra, salt], sort_keys=True, ensure_ascii=False)
    value = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") >> (64 - ID_BITS)
    return value or 1


@dataclass
class ChunkRow:
    id: int
    source: str
    position: int
    text: str
    extra: dict


class Catalog:
    def __init__(self, connection: sqlite3.Connection, path: Path):
        self.connection = connection
        self.path = path
        # Held by every transaction and by close(): the connection is shared by all threads.
        # Re-entrant, so code inside a transaction may call methods that open none.
        self.lock = threading.RLock()

    @classmethod
    def open(cls, index_dir: Path, read_only: bool = False) -> Catalog:
        path = Path(index_dir) / CATALOG_FILE
        if read_only:
            connection = sqlite3.connect(
                f"file:{path}?mode=ro", uri=True, timeout=30, isolation_level=None, check_same_thread=False
            )
        else:
            connection = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")  # a committed file survives power loss too
            connection.executescript(SCHEMA)
        return cls(connection, path)

    def close(self) -> None:
        with self.lock:
            self.connection.close()

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One atomic unit; a read transaction is a consistent snapshot under WAL. One thread at a time."""
        with self.lock:
            self.connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self.connection
            except BaseException:
                self.connection.execute("ROLLBACK")
                raise
            self.connection.execute("COMMIT")

    # ------------------------------------------------------------------ generations
    def _meta_int(self, key: str) -> int:
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    @property
    def generation(self) -> int:
        return self._meta_int("generation")

    @property
    def store_generation(self) -> int:
        return self._meta_int("store_generation")

    def set_store_generation(self, generation: int) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES ('store_generation', ?)", (str(generation),))

    @staticmethod
    def _bump(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT INTO meta VALUES ('generation', '1') "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    # ------------------------------------------------------------------ full-text index (fulltext.py)
    @property
    def has_fulltext(self) -> bool:
        return fulltext.has_fulltext(self.connection)

    def ensure_fulltext(self) -> int | None:
        """Build the full-text index of a catalog that lacks it (or holds an older version), in one
        transaction (a kill leaves the catalog as it was); the number of chunks it then covers,
        None when it was there already. Chunks committed later reach it through its triggers."""
        if self.has_fulltext:
            return None
        with self.transaction() as db:
            if not fulltext.add_fulltext(db):  # another process built it since the check
                return None
            crash_point("fulltext_built")
        return self.chunk_count()

    # ------------------------------------------------------------------ files
    def file_hashes(self) -> dict[str, str]:
        return dict(self.connection.execute("SELECT path, sha256 FROM files"))

    def replace_file(
        self, source: str, sha256: str, size: int, chunks: Sequence, vectors: np.ndarray
    ) -> tuple[list[int], list[int]]:
        """Swap a file's chunks in one transaction; returns (removed ids, added ids).

        Added ids are ``content_chunk_id`` of each chunk (a salted one in the rare case that
        another file's chunk holds it already)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self.transaction() as db:
            removed = self._delete_chunks(db, source)
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", (source, sha256, size, len(chunks)))
            added = []
            for chunk, vector in zip(chunks, vectors):
                row = (source, chunk.position, chunk.text, json.dumps(chunk.extra), vector.tobytes())
                for salt in range(100):
                    chunk_id = content_chunk_id(source, chunk.position, chunk.text, chunk.extra, salt)
                    try:
                        db.execute(
                            "INSERT INTO chunks (id, path, position, text, extra, vector) VALUES (?, ?, ?, ?, ?, ?)",
                            (chunk_id, *row),
                        )
                        break
                    except sqlite3.IntegrityError:
                        continue  # another chunk holds this id: take the next salt
                else:
                    raise RuntimeError(f"no free chunk id for {source} #{chunk.position}")
                added.append(chunk_id)
            self._bump(db)
        return removed, added

    def remove_file(self, source: str) -> list[int]:
        with self.transaction() as db:
            removed = self._delete_chunks(db, source)
            db.execute("DELETE FROM files WHERE path = ?", (source,))
            self._bump(db)
        return removed

    @staticmethod
    def _delete_chunks(db: sqlite3.Connection, source: str) -> list[int]:
        removed = [row[0] for row in db.execute("SELECT id FROM chunks WHERE path = ?", (source,))]
        db.execute("DELETE FROM chunks WHERE path = ?", (source,))
        return removed

    # ------------------------------------------------------------------ chunks
    def chunk_count(self) -> int:
        return int(self.connection.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def vectors(self, ids: Sequence[int] | None = None, dimension: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(ids int64 [N], vectors float32 [N, d]) of all chunks, or of the given ids."""
        if ids is None:
            rows = self.connection.execute("SELECT id, vector FROM chunks ORDER BY id").fetchall()
        else:
            rows = []
            for batch in _batches(list(ids), 500):
                marks = ",".join("?" * len(batch))
                rows += self.connection.execute(
                    f"SELECT id, vector FROM chunks WHERE id IN ({marks})", batch
                ).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, dimension or 0), dtype=np.float32)
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), -1)
        return np.array([row[0] for row in rows], dtype=np.int64), matrix

    def rows(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        found: dict[int, ChunkRow] = {}
        for batch in _batches(list(ids), 500):
            marks = ",".join("?" * len(batch))
            query = f"SELECT id, path, position, text, extra FROM chunks WHERE id IN ({marks})"
            for chunk_id, source, position, text, extra in self.connection.execute(query, batch):
                found[chunk_id] = ChunkRow(chunk_id, source, position, text, json.loads(extra))
        return found

    def sources(self) -> list[str]:
        return [row[0] for row in self.connection.execute("SELECT path FROM files ORDER BY path")]

    def ids_of_sources(self, sources: Sequence[str]) -> np.ndarray:
        ids: list[int] = []
        for batch in _batches(list(sources), 500):
            marks = ",".join("?" * len(batch))
            ids += [row[0] for row in self.connection.execute(f"SELECT id FROM chunks WHERE path IN ({marks})", batch)]
        return np.array(sorted(ids), dtype=np.int64)

    def payloads(self, ids: Sequence[int]) -> list[dict]:
        rows = self.rows(ids)
        return [{"source": rows[i].source, "position": rows[i].position} for i in ids]


def _batches(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
