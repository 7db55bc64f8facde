"""``VectorStore``: what the indexer and search need from a vector store bound to an index's catalog.

The SQLite catalog is the source of truth (chunks, vectors, a generation number per commit);
a store is a derived view of its vectors that the indexer keeps in step and search asks for
the top k. The indexer and search talk to this protocol only.

A store's class is registered (registry.py) and opened through two class methods besides:

    open(index_dir, catalog, options, dimension, for_search=False) -> VectorStore
        the store ``options`` (a ``StoreOptions``: its settings as attributes) name, bound to
        ``catalog`` (None: no catalog, e.g. to drop it); ``for_search``: opened by a query;
    wipe(index_dir, options, dimension, drop_server_collection) -> None
        a rebuild: remove its files from ``index_dir`` (called for every registered store, whichever
        the index used); with ``drop_server_collection``, also what it keeps outside the folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["VectorStore"]


@runtime_checkable
class VectorStore(Protocol):
    """What the indexer and search need from a vector store bound to an index's catalog."""

    fallback_reason: str | None  # why search() last answered None

    def describe(self) -> dict:
        """The ``store_options`` the manifest records (e.g. {"faiss_index": "flat"})."""

    def ensure_empty(self) -> None:
        """A new index starts here: refuse a store holding points this index folder did not write."""

    def repair(self) -> str | None:
        """Bring a store that lags the catalog (a killed run) back to it; a note of what was done."""

    def apply(
        self, removed: Sequence[int], added: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]
    ) -> None:
        """Mirror one committed file: its chunks ``removed`` from the catalog and ``added`` to it."""

    def sync(self) -> None:
        """Make what was applied durable; the store then reflects the catalog's generation."""

    def finish(self, previous: dict | None) -> None:
        """End of an index run: bring the store to the catalog's generation. ``previous`` is the
        ``store_options`` of the manifest before this run (None for a new index)."""

    def search(self, vector: np.ndarray, k: int, sources: Sequence[str] | None) -> list[tuple[int, float]] | None:
        """Top-k (chunk id, score), restricted to chunks of ``sources`` when given. None when the
        store cannot answer for the catalog's current state (``fallback_reason`` says why): the
        caller then searches the catalog's vectors exactly."""

    def place_on_gpu(self, device: int) -> str | None:
        """Search on CUDA GPU ``device`` where the store can; a note for the user where it cannot
        (None: placed, or placement is not this store's to decide, as for a Qdrant server)."""

    def close(self) -> None: ...
