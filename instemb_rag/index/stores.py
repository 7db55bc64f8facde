"""The vector stores behind an index folder, behind one protocol: ``VectorStore``.

The SQLite catalog is the source of truth (chunks, vectors, a generation number per commit);
a store is a derived view of its vectors that the indexer keeps in step and search asks for
the top k. The indexer and search talk to ``VectorStore`` only; which store an index uses is
decided here (``open_store``), from the options of a new index or the manifest of an old one.

    FaissStore    instemb_rag/index/faiss_store.py   a cache file per catalog generation
    QdrantStore   instemb_rag/index/qdrant_store.py  embedded shard or server collection
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from enum import Enum
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..choices import FaissIndexKind, QdrantQuantization, StoreKind, values
from .catalog import CATALOG_FILE
from .errors import BadInputError, IndexFolderError
from .faiss_store import FAISS_KINDS, FaissStore
from .manifest import MANIFEST_FILE, Manifest
from .qdrant_store import DEFAULT_COLLECTION, CollectionOptions, QdrantStore

STORE_KINDS = values(StoreKind)


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


@dataclass
class StoreOptions:
    store: str | None = None  # faiss | qdrant; None: the manifest's store, or faiss for a new index
    faiss_index: str | None = None  # flat | hnsw | ivf; None: the manifest's, or flat
    qdrant_url: str | None = None  # None: embedded shard in the index folder
    qdrant_api_key: str | None = None
    qdrant_collection: str = DEFAULT_COLLECTION
    # Layout of a new server collection (CollectionOptions; recorded in the manifest)
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    on_disk: bool = False
    quantization: str = "none"

    def collection_options(self) -> CollectionOptions:
        return CollectionOptions(**{f.name: getattr(self, f.name) for f in fields(CollectionOptions)})

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, qdrant_url: str | None = None, qdrant_api_key: str | None = None
    ) -> StoreOptions:
        """The options an existing index was built with (a server URL can be overridden)."""
        recorded = manifest.store_options
        return cls(
            store=manifest.store,
            faiss_index=recorded.get("faiss_index"),
            qdrant_url=qdrant_url or recorded.get("qdrant_url"),
            qdrant_api_key=qdrant_api_key,
            qdrant_collection=recorded.get("qdrant_collection", DEFAULT_COLLECTION),
            **vars(CollectionOptions.from_recorded(recorded)),
        )


def parse_choice(enum_type: type[Enum], value, field: str, error_type: type[Exception] = BadInputError) -> str:
    """``value`` as one of ``enum_type``'s values, or ``error_type`` naming ``field`` and the choices."""
    try:
        return enum_type(value).value
    except ValueError:
        choices = ", ".join(member.value for member in enum_type)
        raise error_type(f"{field} must be one of {choices}, got {value!r}") from None


def resolve_options(options: StoreOptions, manifest: Manifest | None, index_dir: Path) -> StoreOptions:
    """The store of a new index (the options, default faiss/flat) or of an existing one (its
    manifest's; asking for another store is refused), with every choice checked."""
    if manifest is None:
        store = parse_choice(StoreKind, options.store or "faiss", "--store")
        faiss_index = parse_choice(FaissIndexKind, options.faiss_index or "flat", "--faiss-index")
        quantization = parse_choice(QdrantQuantization, options.quantization or "none", "--qdrant-quantization")
        for name in ("shard_number", "replication_factor", "write_consistency_factor"):
            if getattr(options, name) is not None and getattr(options, name) < 1:
                raise BadInputError(f"{name} must be at least 1, got {getattr(options, name)}")
        return replace(options, store=store, faiss_index=faiss_index, quantization=quantization)
    store = parse_choice(StoreKind, manifest.store, f"{index_dir / MANIFEST_FILE}: store", IndexFolderError)
    if options.store and parse_choice(StoreKind, options.store, "--store") != store:
        raise IndexFolderError(
            f"The index in {index_dir} uses --store {store}; to switch to {StoreKind(options.store).value}, "
            "pass --rebuild (re-embeds everything) or use another --index-dir."
        )
    faiss_index = parse_choice(
        FaissIndexKind, options.faiss_index or manifest.store_options.get("faiss_index", "flat"), "--faiss-index"
    )
    # the collection exists: its layout is the one recorded when it was created
    layout = vars(CollectionOptions.from_recorded(manifest.store_options))
    return replace(options, store=store, faiss_index=faiss_index, **layout)


def open_store(
    index_dir: Path, catalog, options: StoreOptions, dimension: int, for_search: bool = False
) -> VectorStore:
    """The store ``options`` (resolved, or read from a manifest) name, bound to ``catalog``."""
    kind = parse_choice(StoreKind, options.store, f"{Path(index_dir) / MANIFEST_FILE}: store", IndexFolderError)
    if kind == StoreKind.faiss.value:
        return FaissStore(index_dir, catalog, options.faiss_index or "flat", dimension)
    return QdrantStore.open(index_dir, catalog, options, dimension, for_search=for_search)


def wipe_index(index_dir: Path, options: StoreOptions, dimension: int, drop_server_collection: bool) -> None:
    """Remove the manifest first (so a kill mid-wipe reads as 'no index'), then the rest; with
    ``drop_server_collection``, also the points of a server collection named by the options."""
    index_dir = Path(index_dir)
    (index_dir / MANIFEST_FILE).unlink(missing_ok=True)
    FaissStore.wipe_local(index_dir)
    QdrantStore.wipe_local(index_dir)
    for path in list(index_dir.iterdir()):
        if path.name.startswith(CATALOG_FILE) or path.name.endswith(".tmp"):
            path.unlink(missing_ok=True)
    if drop_server_collection and options.qdrant_url:
        QdrantStore.open(index_dir, None, options, dimension).drop()


__all__ = [
    "FAISS_KINDS",
    "STORE_KINDS",
    "FaissIndexKind",
    "StoreKind",
    "StoreOptions",
    "VectorStore",
    "open_store",
    "resolve_options",
    "wipe_index",
]
