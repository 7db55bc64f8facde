"""The vector stores behind an index folder, behind one protocol (base.py: ``VectorStore``).

Which store an index uses is decided here (``open_store``), from the options of a new index or
the manifest of an old one (options.py resolves them):

    FaissStore    faiss.py      a cache file per catalog generation (faiss_gpu.py: search on a GPU)
    QdrantStore   qdrant.py     embedded shard or server collection
"""

from __future__ import annotations

from pathlib import Path

from ...choices import StoreKind
from ..catalog import CATALOG_FILE
from ..errors import IndexFolderError
from ..manifest import MANIFEST_FILE
from ..options import StoreOptions, parse_choice
from .base import VectorStore
from .faiss import FAISS_KINDS, FaissStore
from .qdrant import QdrantStore

__all__ = ["FAISS_KINDS", "FaissStore", "QdrantStore", "VectorStore", "open_store", "wipe_index"]


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
