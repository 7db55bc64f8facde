"""FAISS vector store: a derived cache of the catalog's vectors, one file per generation.

The file is named after the catalog generation it reflects (``vectors-g17.faiss``) and is
written to a temporary name then renamed, so a reader finds either a complete file for
the current generation or none, in which case the index is rebuilt from the catalog.
Inner product on L2-normalised vectors = cosine. ``flat`` is exact; ``hnsw`` and ``ivf``
are approximate, for large corpora.

Registered as the store ``faiss`` (``REGISTRATION``; registry.py), the default of a new index.
faiss and numpy are imported where used, so that reading the registry (the command line) does not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...choices import FaissIndexKind, values
from ..crash import crash_point
from .registry import THIS_RUN_ELSE_RECORDED, StoreRegistration, StoreSetting

if TYPE_CHECKING:
    import faiss
    import numpy as np

FAISS_KINDS = values(FaissIndexKind)
CACHE_PATTERN = re.compile(r"^vectors-g(\d+)\.faiss$")
HNSW_NEIGHBOURS = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
IVF_POINTS_PER_LIST = 39  # faiss warns below ~39 training points per centroid

REGISTRATION = StoreRegistration(
    name="faiss",
    store_class=f"{__name__}:FaissStore",
    summary="faiss: a FAISS file beside the SQLite catalog",
    settings=(
        StoreSetting(
            "faiss_index",
            "--faiss-index",
            "flat is exact (default); hnsw and ivf are approximate.",
            default="flat",
            type=FaissIndexKind,
            on_existing_index=THIS_RUN_ELSE_RECORDED,  # another kind: the cache is rebuilt (finish)
        ),
    ),
)


def cache_path(index_dir: Path, generation: int) -> Path:
    return Path(index_dir) / f"vectors-g{generation}.faiss"


def build_index(kind: str | FaissIndexKind, ids: np.ndarray, vectors: np.ndarray, dimension: int) -> faiss.Index:
    import faiss
    import numpy as np

    if kind not in FAISS_KINDS:
        raise ValueError(f"faiss index kind must be one of {FAISS_KINDS}, got {kind!r}")
    kind = FaissIndexKind(kind).value
    vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dimension)
    if kind == "flat" or (kind == "ivf" and len(vectors) < 2 * IVF_POINTS_PER_LIST):
        # Too few points to train IVF centroids: exact search is both correct and fast here.
        inner = faiss.IndexFlatIP(dimension)
    elif kind == "hnsw":
        inner = faiss.IndexHNSWFlat(dimension, HNSW_NEIGHBOURS, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        inner.hnsw.efSearch = HNSW_EF_SEARCH
    else:
        lists = max(1, min(int(np.sqrt(len(vectors)) * 4), len(vectors) // IVF_POINTS_PER_LIST))
        quantizer = faiss.IndexFlatIP(dimension)
        inner = faiss.IndexIVFFlat(quantizer, dimension, lists, faiss.METRIC_INNER_PRODUCT)
        inner.train(vectors)
        inner.nprobe = max(1, lists // 8)
    index = faiss.IndexIDMap(inner)
    if len(vectors):
        index.add_with_ids(vectors, np.ascontiguousarray(ids, dtype=np.int64))
    return index


def save_cache(index: faiss.Index, index_dir: Path, generation: int) -> Path:
    """Write atomically, then drop the files of older generations."""
    import faiss

    target = cache_path(index_dir, generation)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    faiss.write_index(index, str(temporary))
    with open(temporary, "rb") as stream:
        os.fsync(stream.fileno())
    os.replace(temporary, target)
    for path in Path(index_dir).iterdir():
        match = CACHE_PATTERN.match(path.name)
        if match and int(match.group(1)) != generation:
            path.unlink(missing_ok=True)
    return target


def load_cache(index_dir: Path, generation: int) -> faiss.Index | None:
    """The cache of exactly this generation, or None (missing, stale or unreadable)."""
    import faiss

    path = cache_path(index_dir, generation)
    if not path.is_file():
        return None
    try:
        return faiss.read_index(str(path))
    except RuntimeError:
        return None  # damaged cache: the caller rebuilds it from the catalog


def search(index: faiss.Index, vector: np.ndarray, k: int, allowed_ids: np.ndarray | None) -> list[tuple[int, float]]:
    """Top-k (id, score); allowed_ids restricts the search exactly (filter before ranking)."""
    import faiss
    import numpy as np

    if index.ntotal == 0 or (allowed_ids is not None and len(allowed_ids) == 0):
        return []
    params = None
    if allowed_ids is not None:
        selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed_ids, dtype=np.int64))
        inner = faiss.downcast_index(index.index)
        if isinstance(inner, faiss.IndexIVF):
            params = faiss.SearchParametersIVF(sel=selector, nprobe=inner.nprobe)
        else:
            params = faiss.SearchParameters(sel=selector)
    scores, ids = index.search(np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1), k, params=params)
    return [(int(i), float(s)) for i, s in zip(ids[0], scores[0]) if i >= 0]


class FaissStore:
    """A ``VectorStore`` (see base.py): the FAISS cache file of ``catalog``'s current generation.

    Nothing is written while files are committed; ``finish`` writes the cache of the final
    generation. Search loads that cache, or rebuilds the index in memory from the catalog when
    an `index` run has moved past it, so it always answers for the catalog's current state.
    """

    fallback_reason = None

    def __init__(self, index_dir: Path, catalog, kind: str | FaissIndexKind, dimension: int):
        self.index_dir = Path(index_dir)
        self.catalog = catalog
        self.kind = FaissIndexKind(kind).value
        self.dimension = dimension
        self._index = None
        self._index_generation = -1
        self._gpu_device: int | None = None  # set by place_on_gpu
        self._gpu_index = None
        self._gpu_generation = -1

    @classmethod
    def open(cls, index_dir: Path, catalog, options, dimension: int, for_search: bool = False) -> FaissStore:
        """The store ``options`` (a ``StoreOptions``) name: the cache of its ``faiss_index`` kind."""
        return cls(index_dir, catalog, options.faiss_index or "flat", dimension)

    @classmethod
    def wipe(cls, index_dir: Path, options, dimension: int, drop_server_collection: bool) -> None:
        """A rebuild: the cache files go (there is nothing outside the folder)."""
        cls.wipe_local(index_dir)

    @staticmethod
    def wipe_local(index_dir: Path) -> None:
        for path in list(Path(index_dir).iterdir()):
            if CACHE_PATTERN.match(path.name):
                path.unlink(missing_ok=True)

    def describe(self) -> dict:
        return {"faiss_index": self.kind}

    def ensure_empty(self) -> None:
        pass  # the cache lives in the index folder, which a new index has just wiped

    def repair(self) -> str | None:
        return None  # a stale or missing cache is rebuilt from the catalog by finish() and search()

    def apply(
        self, removed: Sequence[int], added: Sequence[int], vectors: np.ndarray, payloads: Sequence[dict]
    ) -> None:
        pass

    def sync(self) -> None:
        pass

    def finish(self, previous: dict | None) -> None:
        generation = self.catalog.generation
        kind_changed = previous is not None and previous.get("faiss_index", "flat") != self.kind
        if not kind_changed and cache_path(self.index_dir, generation).is_file():
            return
        crash_point("before_faiss")
        ids, vectors = self.catalog.vectors(dimension=self.dimension)
        save_cache(build_index(self.kind, ids, vectors, self.dimension), self.index_dir, generation)
        self.catalog.set_store_generation(generation)

    def place_on_gpu(self, device: int) -> str | None:
        """Search on CUDA GPU ``device`` from now on; returns a notice (and stays on the CPU) when
        the installed faiss has no GPU support or sees no GPU, so the user learns how to get it."""
        from .faiss_gpu import GPU_EXTRA_HINT, faiss_gpu_available

        if not faiss_gpu_available():
            return (
                f"FAISS searches on the CPU: the installed faiss has no GPU support. For GPU search: {GPU_EXTRA_HINT}."
            )
        self._gpu_device = device
        return None

    def search(self, vector: np.ndarray, k: int, sources: Sequence[str] | None) -> list[tuple[int, float]]:
        if sources is None and self._gpu_device is not None:
            return search(self._current_gpu_index(), vector, k, None)
        # Filtered searches stay on the CPU copy: GPU indexes take no IDSelector.
        allowed = None if sources is None else self.catalog.ids_of_sources(sources)
        return search(self._current_index(), vector, k, allowed)

    def _current_gpu_index(self):
        """The GPU copy of the current generation's index (the CPU index stays for saving and filters)."""
        from .faiss_gpu import to_gpu_index

        cpu_index = self._current_index()
        if self._gpu_index is None or self._gpu_generation != self._index_generation:
            self._gpu_index, self._gpu_generation = to_gpu_index(cpu_index, self._gpu_device), self._index_generation
        return self._gpu_index

    def _current_index(self) -> faiss.Index:
        generation = self.catalog.generation
        if self._index is None or self._index_generation != generation:
            index = load_cache(self.index_dir, generation)
            if index is None:
                ids, vectors = self.catalog.vectors(dimension=self.dimension)
                index = build_index(self.kind, ids, vectors, self.dimension)
            self._index, self._index_generation = index, generation
        return self._index

    def close(self) -> None:
        self._index = None
        self._gpu_index = None
