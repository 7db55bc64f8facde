"""Choosing, opening and wiping the vector store named by the options or the manifest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .catalog import CATALOG_FILE
from .faiss_store import CACHE_PATTERN, FAISS_KINDS
from .manifest import MANIFEST_FILE
from .qdrant_store import DEFAULT_COLLECTION, EmbeddedQdrant, ServerQdrant

STORE_KINDS = ("faiss", "qdrant")


@dataclass
class StoreOptions:
    store: str | None = None  # None: the manifest's store, or faiss for a new index
    faiss_index: str | None = None  # flat | hnsw | ivf; None: the manifest's, or flat
    qdrant_url: str | None = None  # None: embedded shard in the index folder
    qdrant_api_key: str | None = None
    qdrant_collection: str = DEFAULT_COLLECTION


def open_qdrant(index_dir: Path, options: StoreOptions, dimension: int):
    if options.qdrant_url:
        return ServerQdrant(options.qdrant_url, options.qdrant_api_key, options.qdrant_collection, dimension)
    return EmbeddedQdrant(index_dir, dimension)


def describe_store(store: str, faiss_index: str, options: StoreOptions) -> dict:
    if store == "faiss":
        return {"faiss_index": faiss_index}
    if options.qdrant_url:
        return {"qdrant_url": options.qdrant_url, "qdrant_collection": options.qdrant_collection}
    return {"qdrant": "embedded"}


def validate_kinds(store: str, faiss_index: str) -> None:
    if store not in STORE_KINDS:
        raise ValueError(f"--store must be one of {', '.join(STORE_KINDS)}, got {store!r}")
    if faiss_index not in FAISS_KINDS:
        raise ValueError(f"--faiss-index must be one of {', '.join(FAISS_KINDS)}, got {faiss_index!r}")


def wipe_local_files(index_dir: Path) -> None:
    """Remove the manifest first (so a kill mid-wipe reads as 'no index'), then the rest."""
    index_dir = Path(index_dir)
    (index_dir / MANIFEST_FILE).unlink(missing_ok=True)
    EmbeddedQdrant.destroy(index_dir)
    for path in list(index_dir.iterdir()):
        if CACHE_PATTERN.match(path.name) or path.name.startswith(CATALOG_FILE) or path.name.endswith(".tmp"):
            path.unlink(missing_ok=True)
