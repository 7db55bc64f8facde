"""The vector stores behind an index folder, behind one protocol (base.py: ``VectorStore``).

Each store is one module here, registered in one place (registry.py: its name, class and
settings); ``open_store`` and ``wipe_index`` read the registry and name no store:

    FaissStore    faiss.py      a cache file per catalog generation (faiss_gpu.py: search on a GPU)
    QdrantStore   qdrant.py     embedded shard or server collection

The names below are imported on first use, so that reading the registry (the command line's
options) imports no faiss or numpy.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import IndexFolderError
from .registry import registered_stores, store_registration

if TYPE_CHECKING:
    from ..options import StoreOptions
    from .base import VectorStore
    from .faiss import FAISS_KINDS, FaissStore
    from .qdrant import QdrantStore

__all__ = ["FAISS_KINDS", "FaissStore", "QdrantStore", "VectorStore", "open_store", "wipe_index"]

_HOMES = {"FAISS_KINDS": ".faiss", "FaissStore": ".faiss", "QdrantStore": ".qdrant", "VectorStore": ".base"}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOMES[name], __name__), name)


def open_store(
    index_dir: Path, catalog, options: StoreOptions, dimension: int, for_search: bool = False
) -> VectorStore:
    """The store ``options`` (resolved, or read from a manifest) name, bound to ``catalog``."""
    from ..manifest import MANIFEST_FILE

    where = f"{Path(index_dir) / MANIFEST_FILE}: store"
    store_class = store_registration(options.store, where, IndexFolderError).load()
    return store_class.open(index_dir, catalog, options, dimension, for_search=for_search)


def wipe_index(index_dir: Path, options: StoreOptions, dimension: int, drop_server_collection: bool) -> None:
    """Remove the manifest first (so a kill mid-wipe reads as 'no index'), then every registered
    store's files and the catalog; with ``drop_server_collection``, a store also drops what it
    keeps outside the folder (a server collection) for these options."""
    from ..catalog import CATALOG_FILE
    from ..manifest import MANIFEST_FILE

    index_dir = Path(index_dir)
    (index_dir / MANIFEST_FILE).unlink(missing_ok=True)
    for registration in registered_stores().values():
        registration.load().wipe(index_dir, options, dimension, drop_server_collection)
    for path in list(index_dir.iterdir()):
        if path.name.startswith(CATALOG_FILE) or path.name.endswith(".tmp"):
            path.unlink(missing_ok=True)
