"""Searching an index folder: `Index.open(dir).search(text, instruction, k, filter)`."""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .catalog import Catalog
from .errors import BadInputError, IndexFolderError
from .manifest import Manifest, check_encoder, read_manifest
from .options import StoreOptions
from .stores import open_store

__all__ = ["FILTER_KEYS", "Index", "SearchHit", "parse_filters"]

FILTER_KEYS = ("source",)


@dataclass
class SearchHit:
    score: float
    source: str
    position: int
    text: str
    chunk_id: int
    extra: dict

    def to_dict(self) -> dict:
        return asdict(self)


def parse_filters(expressions: list[str] | None) -> dict[str, str]:
    """'source=tents/*.md' -> {'source': 'tents/*.md'}; several expressions must all hold."""
    parsed: dict[str, str] = {}
    for expression in expressions or []:
        key, sign, value = expression.partition("=")
        key, value = key.strip(), value.strip()
        if not sign or not value:
            raise BadInputError(f"--filter '{expression}' is not KEY=VALUE; e.g. --filter source=tents/ridgeline.md")
        if key not in FILTER_KEYS:
            raise BadInputError(f"--filter key '{key}' is unknown; filterable keys: {', '.join(FILTER_KEYS)}")
        parsed[key] = value
    return parsed


class Index:
    """An index folder opened for search, through its ``VectorStore`` (stores/base.py).

    FAISS: the cache file of the catalog's current generation is loaded, or rebuilt in
    memory from the catalog when an `index` run has moved past it. Embedded Qdrant: the
    shard is opened under the index lock (held until ``close()``). Whenever the store cannot
    answer for the catalog's current state (an `index` run holds the lock, or the store lags
    the catalog), search runs exactly over the catalog's vectors instead, so a query always
    sees the last committed state; ``fallback_reason`` says why.
    """

    def __init__(
        self, index_dir: Path, manifest: Manifest, catalog: Catalog, encoder=None, stores: StoreOptions | None = None
    ):
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self.catalog = catalog
        self.encoder = encoder
        given = stores or StoreOptions()  # only a server URL and API key can differ from the manifest's
        self.stores = StoreOptions.from_manifest(manifest, given.qdrant_url, given.qdrant_api_key)
        self.store = open_store(self.index_dir, catalog, self.stores, manifest.dimension, for_search=True)
        self.fallback_reason: str | None = self.store.fallback_reason
        self.placement_note: str | None = None  # set when FAISS cannot follow the encoder onto its GPU
        self._place_faiss_beside_the_encoder()

    def _place_faiss_beside_the_encoder(self) -> None:
        """With the encoder on a CUDA device, FAISS searches on that GPU too (when faiss has GPU
        support; otherwise the note says how to get it and search stays on the CPU)."""
        device = getattr(self.encoder, "device", None)  # None: an Index opened without an encoder
        if getattr(device, "type", None) != "cuda":
            return
        self.placement_note = self.store.place_on_gpu(device.index or 0)

    @classmethod
    def open(
        cls,
        index_dir: str | Path = ".instemb",
        encoder=None,
        model: str | None = None,
        qdrant_url: str | None = None,
        qdrant_api_key: str | None = None,
        device: str = "auto",
    ) -> Index:
        """Open index_dir; load the encoder it was built with unless one is given."""
        index_dir = Path(index_dir)
        manifest = read_manifest(index_dir)
        if manifest is None:
            raise IndexFolderError(
                f"No index in {index_dir} (no manifest.json). Build one first: "
                f"`instemb-rag index PATH --index-dir {index_dir}`."
            )
        label = model or manifest.encoder_reference
        if encoder is None:
            from ..encoder import InstEmbEncoder

            reference = model or (None if manifest.encoder_reference == "default" else manifest.encoder_reference)
            encoder = InstEmbEncoder.from_pretrained(reference, device=device)
        check_encoder(manifest, encoder.fingerprint, encoder.dimension, index_dir, label)
        stores = StoreOptions.from_manifest(manifest, qdrant_url, qdrant_api_key)
        catalog = Catalog.open(index_dir)
        try:
            return cls(index_dir, manifest, catalog, encoder, stores)
        except BaseException:
            catalog.close()
            raise

    def close(self) -> None:
        self.store.close()
        self.catalog.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ search
    def encode_query(self, query: str, instruction: str | None = None) -> np.ndarray:
        if not isinstance(query, str) or not query.strip():
            raise BadInputError("The query is empty: give the text to search for.")
        if instruction is not None and not instruction.strip():
            raise BadInputError("The instruction is empty: leave out --instruction or give one.")
        if self.encoder is None:
            raise BadInputError("This Index has no encoder: pass a query vector, or open it with an encoder.")
        return self.encoder.encode_queries([query], instruction)[0]

    def search(
        self, query: str | np.ndarray, instruction: str | None = None, k: int = 5, filter: dict[str, str] | None = None
    ) -> list[SearchHit]:
        """Top-k chunks for a query text (embedded with one prefill) or a query vector."""
        if k < 1:
            raise BadInputError(f"k must be at least 1, got {k}.")
        vector = self.encode_query(query, instruction) if isinstance(query, str) else np.asarray(query, np.float32)
        if vector.shape != (self.manifest.dimension,):
            raise BadInputError(
                f"The query vector has shape {vector.shape}; this index holds {self.manifest.dimension}-d vectors."
            )
        with self.catalog.transaction(write=False):  # one snapshot: ids and rows agree
            sources = self._matching_sources(filter or {})
            ranked = self._ranked(vector, k, sources)
            rows = self.catalog.rows([chunk_id for chunk_id, _ in ranked])
        return [
            SearchHit(score, rows[i].source, rows[i].position, rows[i].text, i, rows[i].extra)
            for i, score in ranked
            if i in rows
        ][:k]

    def _matching_sources(self, filters: dict[str, str | list[str]]) -> list[str] | None:
        """Sources matching filter["source"]: one name or glob, or a list of them (any may match)."""
        wanted = filters.get("source")
        if wanted is None:
            return None
        patterns = [wanted] if isinstance(wanted, str) else list(wanted)
        return [
            source
            for source in self.catalog.sources()
            if any(source == pattern or fnmatch.fnmatchcase(source, pattern) for pattern in patterns)
        ]

    def _ranked(self, vector: np.ndarray, k: int, sources: list[str] | None) -> list[tuple[int, float]]:
        ranked = self.store.search(vector, k, sources)
        if ranked is None:
            self.fallback_reason = self.store.fallback_reason
            return self._exact(vector, k, sources)
        return ranked

    def _exact(self, vector: np.ndarray, k: int, sources: list[str] | None) -> list[tuple[int, float]]:
        if sources is None:
            ids, vectors = self.catalog.vectors(dimension=self.manifest.dimension)
        else:
            ids, vectors = self.catalog.vectors(self.catalog.ids_of_sources(sources).tolist(), self.manifest.dimension)
        if not len(ids):
            return []
        scores = vectors @ vector
        top = np.argsort(-scores)[:k]
        return [(int(ids[i]), float(scores[i])) for i in top]
