"""An in-memory LRU of query embeddings.

An InstEmb query embedding depends on the query text, its instruction and the encoder's
weights, so all three make up the key: the same question asked under two instructions
must never share an entry, and a reloaded or retrained encoder must never reuse old ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple


class QueryKey(NamedTuple):
    fingerprint: str
    instruction: str | None
    text: str


class QueryEmbeddingCache:
    """Thread-safe least-recently-used map from QueryKey to an embedding (list of floats)."""

    def __init__(self, max_entries: int = 1024):
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0 (0 turns the cache off), got {max_entries}.")
        self.max_entries = max_entries
        self._entries: OrderedDict[QueryKey, list[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: QueryKey) -> list[float] | None:
        with self._lock:
            embedding = self._entries.get(key)
            if embedding is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            # A copy: callers (LlamaIndex stores) may mutate the list they get.
            return list(embedding)

    def put(self, key: QueryKey, embedding: list[float]) -> None:
        if self.max_entries == 0:
            return
        with self._lock:
            self._entries[key] = list(embedding)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: QueryKey) -> bool:
        return key in self._entries
