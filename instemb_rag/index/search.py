"""Searching an index folder: `Index.open(dir).search(text, instruction, k, filter, hybrid=...)`.

A search is the query service's (service/answer.py): it checks the query, embeds it and hands the
vector back to ``Index.rank``, the store's part, below. Dense search asks the vector store (or the catalog's vectors exactly). Hybrid search
(``hybrid="rrf"`` or ``"z"``) also asks the catalog's full-text index (fulltext.py, SQLite FTS5
bm25) with the query and the instruction's content words, and fuses both sides over the union of
their best ``CANDIDATE_DEPTH`` chunks (fusion.py), reading everything from one catalog snapshot.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..encoder.protocol import Encoder, query_knob
from ..knobs import KNOBS, LLM_WEIGHT
from ..queries import Query
from ..service.answer import encoder_embed, explain_hits, require_knobs
from ..service.answer import search as answer
from ..service.request import QueryRequest
from . import fulltext
from .catalog import Catalog
from .errors import BadInputError, IndexFolderError
from .filters import FILTER_KEYS, parse_filters
from .fusion import CANDIDATE_DEPTH, check_hybrid, fuse
from .hits import SearchHit
from .manifest import Manifest, check_encoder, read_manifest
from .options import StoreOptions
from .stores import open_store

__all__ = ["FILTER_KEYS", "Index", "SearchHit", "parse_filters"]


def require_manifest(index_dir: Path) -> Manifest:
    """The folder's manifest, or the error that says how to build an index there."""
    manifest = read_manifest(index_dir)
    if manifest is None:
        raise IndexFolderError(
            f"No index in {index_dir} (no manifest.json). Build one first: "
            f"`instemb-rag index PATH --index-dir {index_dir}`."
        )
    return manifest


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
        self,
        index_dir: Path,
        manifest: Manifest,
        catalog: Catalog,
        encoder: Encoder | None = None,
        stores: StoreOptions | None = None,
    ):
        self.index_dir = Path(index_dir)
        self.manifest = manifest
        self.catalog = catalog
        self.encoder = encoder
        # the manifest's, but for what a query may override (a store's at_query settings: a server URL)
        self.stores = StoreOptions.of_index(manifest, stores)
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
        encoder: Encoder | None = None,
        model: str | None = None,
        qdrant_url: str | None = None,
        qdrant_api_key: str | None = None,
        device: str = "auto",
        read_only: bool = False,
        stores: StoreOptions | None = None,
    ) -> Index:
        """Open index_dir; load the encoder it was built with unless one is given. ``read_only``:
        the catalog is opened so that nothing can write it (the resident query process).
        ``stores``: the settings a query may override (a store's at_query ones, e.g. a Qdrant
        server's URL and API key; ``qdrant_url`` and ``qdrant_api_key`` are kept for callers of
        the older names)."""
        index_dir = Path(index_dir)
        manifest = require_manifest(index_dir)
        label = model or manifest.encoder_reference
        if encoder is None:
            from ..encoder import load_model  # every model reference is resolved there

            encoder = load_model(manifest.encoder_model(model), device=device)
        check_encoder(manifest, encoder, index_dir, label)
        given = {"qdrant_url": qdrant_url, "qdrant_api_key": qdrant_api_key, **(stores.settings if stores else {})}
        stores = StoreOptions.of_index(manifest, given)
        catalog = Catalog.open(index_dir, read_only=read_only)
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
    def search(
        self,
        query: str | Query | np.ndarray,
        instruction: str | None = None,
        k: int = 5,
        filter: dict[str, str] | None = None,
        hybrid: str | None = None,
        hybrid_weight: float | None = None,
        query_vector: np.ndarray | None = None,
        knobs: Mapping[str, float | None] | None = None,
        rerank: bool | None = None,
        rerank_top: int | None = None,
        **named_knobs: float | None,
    ) -> list[SearchHit]:
        """Top-k chunks for a query text (embedded with one prefill) or a query vector: the query
        service's answer (service/answer.py ``search``), its hits.

        ``hybrid`` ("rrf" or "z") fuses the dense ranking with the full-text index's ranking of
        the query and the instruction; ``hybrid_weight`` is the lexical side's share (0..1).
        ``query_vector`` is the text's embedding when the caller has it already.
        ``knobs``: the query-time knobs (name -> value, knobs.py's declarations; each also taken by
        name), only those the model takes; one left out is the model's own. The stored vectors are
        the same for every value: nothing is re-indexed.
        ``query`` may be a ``Query`` (queries.py: text, instruction and knobs, checked where it was made).
        ``rerank``: the model's reader re-orders the top ``rerank_top`` hits (None: where the model has
        one; True: refused for a model without one; reader/reranker.py says how scores are fused)."""
        options = {"k": k, "filter": filter, "hybrid": hybrid, "hybrid_weight": hybrid_weight}
        options |= {"rerank": rerank, "rerank_top": rerank_top}
        request = search_request(query, instruction, {**(knobs or {}), **named_knobs}, query_vector, options)
        return answer(request, self).hits

    def explain(
        self,
        query: str | Query,
        instruction: str | None,
        hits: list[SearchHit],
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> list[dict]:
        """Per hit, what its dense score is made of (the query service's ``explain_hits``): a model
        with a query-time knob, the encoder's ``explain`` over the hits' stored document vectors
        (each space's part, the knob it was taken at, what ranks and the ``score``, the unit
        query's cosine); a model of one space, its ``cosine`` (with hybrid search also ``bm25``).
        ``query`` may be a ``Query`` (queries.py) carrying its instruction and knobs."""
        request = search_request(query, instruction, {**(knobs or {}), **named_knobs})
        return explain_hits(require_knobs(request.checked_query(), self), hits, self)

    def encode_query(
        self,
        query: str | Query,
        instruction: str | None = None,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> np.ndarray:
        """The query's vector under its query-time ``knobs`` (name -> value, knobs.py; each also
        taken by name), each one the model takes."""
        request = search_request(query, instruction, {**(knobs or {}), **named_knobs})
        vector, _ = encoder_embed(self.encoder)(require_knobs(request.checked_query(), self))
        return vector

    @property
    def query_knob(self) -> str | None:
        """The query-time knob of the index's encoder (knobs.py's declarations), or None
        (encoder/protocol.py)."""
        return None if self.encoder is None else query_knob(self.encoder)

    @property
    def two_spaces(self) -> bool:
        """Whether the encoder ranks by two spaces with a query-time weight (a two-space model:
        encoder/composed/), rather than by one cosine."""
        return self.query_knob is not None and KNOBS[self.query_knob] is LLM_WEIGHT

    # ------------------------------------------------------------------ what the query service reads
    @staticmethod
    def hybrid_settings(hybrid: str | None, weight: float | None) -> tuple[str | None, float]:
        """(mode, full-text weight) checked (fusion.py)."""
        return check_hybrid(hybrid, weight)

    def rank(
        self,
        vector: np.ndarray,
        text: str | None,
        instruction: str | None,
        k: int,
        filter: Mapping | None,
        hybrid: str | None,
        weight: float,
    ) -> list[SearchHit]:
        """The store's k best chunks for ``vector`` (a dense search), or, with ``hybrid``, fused with
        the full-text index's ranking of ``text`` and ``instruction``; from one catalog snapshot."""
        vector = np.asarray(vector, np.float32)
        if vector.shape != (self.manifest.dimension,):
            raise BadInputError(
                f"The query vector has shape {vector.shape}; this index holds {self.manifest.dimension}-d vectors."
            )
        with self.catalog.transaction(write=False):  # one snapshot: ids and rows agree
            sources = self._matching_sources(filter or {})
            if hybrid is None:
                ranked = [(chunk_id, score) for chunk_id, score in self._ranked(vector, k, sources)]
            else:
                ranked = self._hybrid(vector, text, instruction, k, sources, hybrid, weight)
            rows = self.catalog.rows([chunk_id for chunk_id, *_ in ranked])
        return [
            SearchHit(score, rows[i].source, rows[i].position, rows[i].text, i, rows[i].extra, *sides)
            for i, score, *sides in ranked
            if i in rows
        ][:k]

    def reader(self):
        """The reader of this index's model (reader/reranker.py; None: it has none), loaded on first use."""
        from ..reader.reranker import reader_of_encoder

        return None if self.encoder is None else reader_of_encoder(self.encoder)

    def stored_documents(self, hits: list[SearchHit]) -> np.ndarray | list[str]:
        """The hits' document vectors as the catalog stores them (every index keeps each chunk's
        float32 vector there, whichever store it searches), where they are this encoder's: what
        ``explain`` reads instead of embedding every hit's text again. Else the hits' texts, which
        the encoder embeds: when the stored vectors come from another document side than the
        encoder's (an Index built around a swapped encoder), or a hit is not this catalog's chunk
        as it is now (re-indexed since the search, or a hit made elsewhere)."""
        texts = [hit.text for hit in hits]
        if self.manifest.stored_vectors_fingerprint != getattr(self.encoder, "document_fingerprint", None):
            return texts
        ids = [hit.chunk_id for hit in hits]
        with self.catalog.transaction(write=False):  # one snapshot: rows and vectors agree
            rows = self.catalog.rows(ids)
            found, vectors = self.catalog.vectors(ids, self.manifest.dimension)
        if any(hit.chunk_id not in rows or rows[hit.chunk_id].text != hit.text for hit in hits):
            return texts
        position = {int(chunk_id): row for row, chunk_id in enumerate(found)}
        return vectors[[position[chunk_id] for chunk_id in ids]]

    def _hybrid(
        self, vector: np.ndarray, text: str, instruction: str | None, k: int, sources, mode: str, weight: float
    ) -> list[tuple[int, float, int | None, int | None, float, float]]:
        """(chunk id, fused score, dense rank, lexical rank, dense score, lexical score) of the k best."""
        db = self.catalog.connection
        if not fulltext.has_fulltext(db):
            raise IndexFolderError(fulltext.missing_fulltext_message(db, self.index_dir))
        depth = max(CANDIDATE_DEPTH, k)
        match = fulltext.match_expression(text, instruction)
        dense = self._ranked(vector, depth, sources)
        lexical = fulltext.lexical_search(db, match, depth, sources)
        candidates = list(dict.fromkeys([chunk_id for chunk_id, _ in dense] + [chunk_id for chunk_id, _ in lexical]))
        if not candidates:
            return []
        ids, vectors = self.catalog.vectors(candidates, self.manifest.dimension)  # exact dense scores for all
        lexical_of = fulltext.lexical_scores(db, match, ids.tolist())
        dense_scores, lexical_scores = vectors @ vector, np.array([lexical_of.get(int(i), 0.0) for i in ids])
        ranking = fuse(dense_scores, lexical_scores, mode, weight, depth)
        return [
            (
                int(ids[position]),
                float(score),
                dense_rank,
                lexical_rank,
                float(dense_scores[position]),
                float(lexical_scores[position]),
            )
            for position, score, dense_rank, lexical_rank in zip(
                ranking.order[:k], ranking.scores[:k], ranking.dense_ranks[:k], ranking.lexical_ranks[:k]
            )
        ]

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


def search_request(
    query: str | Query | np.ndarray | None,
    instruction: str | None,
    knobs: Mapping[str, float | None],
    query_vector: np.ndarray | None = None,
    options: Mapping | None = None,
) -> QueryRequest:
    """The query service's request for this call's arguments: a ``Query`` as given (its
    instruction and knobs in it), a text, or a vector (a dense search of it)."""
    if isinstance(query, Query):
        if instruction is not None or any(value is not None for value in knobs.values()):
            raise BadInputError("A Query carries its instruction and knobs: give them in it, not beside it.")
        return QueryRequest(query_vector=query_vector, **(options or {})).with_query(query)
    if query is not None and not isinstance(query, str):  # a vector: no text to search by
        query, query_vector = None, np.asarray(query, np.float32) if query_vector is None else query_vector
    return QueryRequest(query, instruction, knobs=knobs, query_vector=query_vector, **(options or {}))
