"""Caches: an in-memory LRU of query embeddings, and document embeddings in a key-value store
(LlamaIndex's ``BaseKVStore`` interface: ``get(key, collection=)``, ``put_all(pairs, collection=)``).

An InstEmb query embedding depends on the query text, its instruction and the encoder's
weights (and the query-time knobs it was asked under, knobs.py), so all of them make up the key: the same question asked under two instructions must never share an entry, and a
reloaded or retrained encoder must never reuse old ones.
Document embeddings are keyed the same way (the encoder that embeds documents, the document
instruction, the text).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, NamedTuple


class QueryKey(NamedTuple):
    fingerprint: str
    instruction: str | None
    text: str
    # The query-time knobs given, (name, value) sorted by name (a knob left out: the model's own).
    knobs: tuple[tuple[str, float], ...] = ()


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


class DocumentEmbeddingCache:
    """Document embeddings in a LlamaIndex key-value store (``BaseKVStore``: SimpleKVStore, which
    persists to a file, Redis, ...), so re-ingesting unchanged nodes embeds nothing.

    LlamaIndex's own ``embeddings_cache`` keys on the text alone; a document embedding also
    depends on the encoder that embeds documents and on the document instruction, so the key is a
    hash of all three, in a collection of its own. Hits and misses are counted.
    """

    COLLECTION = "instemb_document_embeddings"

    def __init__(self, store: Any):
        self.store = store
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(fingerprint: str, instruction: str | None, text: str) -> str:
        identity = json.dumps([fingerprint, instruction, text], ensure_ascii=False)
        return hashlib.sha256(identity.encode("utf-8")).hexdigest()

    def get_many(self, keys: list[str]) -> list[list[float] | None]:
        found = [self.store.get(key, collection=self.COLLECTION) for key in keys]
        vectors = [None if value is None else list(value["embedding"]) for value in found]
        with self._lock:
            hit = sum(vector is not None for vector in vectors)
            self.hits += hit
            self.misses += len(vectors) - hit
        return vectors

    def put_many(self, keys: list[str], vectors: list[list[float]]) -> None:
        self.store.put_all(
            [(key, {"embedding": list(vector)}) for key, vector in zip(keys, vectors)], collection=self.COLLECTION
        )
