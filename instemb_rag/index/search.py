"""Searching an index folder: `Index.open(dir).search(text, instruction, k, filter, hybrid=...)`.

Dense search asks the vector store (or the catalog's vectors exactly). Hybrid search
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
from ..queries import EmptyQueryError, Query, QueryKnobs
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
    def encode_query(
        self,
        query: str | Query,
        instruction: str | None = None,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> np.ndarray:
        """The query's vector under its query-time ``knobs`` (name -> value, knobs.py; each also
        taken by name), each one the model takes (``query_knob``)."""
        return self._embed(self._require(self._query(query, instruction, {**(knobs or {}), **named_knobs})))

    def _embed(self, query: Query) -> np.ndarray:
        if self.encoder is None:
            raise BadInputError("This Index has no encoder: pass a query vector, or open it with an encoder.")
        return self.encoder.encode_queries([query.text], query.instruction, **query.knobs.given())[0]

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

    @staticmethod
    def _query(query: str | Query, instruction: str | None, knobs: Mapping[str, float | None]) -> Query:
        """The query as it enters search and explain: a Query as given (checked where it was made:
        the command line, the server), or a text checked here (queries.py)."""
        if isinstance(query, Query):
            if instruction is not None or any(value is not None for value in knobs.values()):
                raise BadInputError("A Query carries its instruction and knobs: give them in it, not beside it.")
            return query
        try:
            return Query.checked(query, instruction, knobs=knobs)
        except EmptyQueryError as error:
            raise BadInputError(str(error)) from None

    def _require(self, query: Query) -> Query:
        """The query, if the encoder takes each knob it gives; else refused, saying what the model is."""
        knob = query.knobs.refused_by(self.encoder)
        if knob is None:
            return query
        asked, has = KNOBS[knob], self.query_knob
        if has is not None:
            other = f"{has} ({KNOBS[has].option})"
            model = f"{KNOBS[has].model}, whose query-time knob is {other}. Drop the option, or set {other} instead"
        else:
            side = getattr(self.encoder, "document_side", None)
            space = f" (documents embedded by {side.description})" if side is not None else ""
            model = f"not {asked.model}: it ranks by one space{space}, with no query-time knob to set. Drop the option"
        raise BadInputError(f"{knob} ({asked.option}) {asked.sets}, but the model of this index is {model}.")

    def explain(
        self,
        query: str | Query,
        instruction: str | None,
        hits: list[SearchHit],
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> list[dict]:
        """Per hit, what its dense score is made of. A model with a query-time knob: the encoder's
        ``explain`` over the hits' stored document vectors (``_stored_documents``; encoder/combine.py's
        rows: each space's part, the knob it was taken at, what ranks and the ``score``, the unit
        query's cosine).
        A model of one space, from the search itself (nothing computed twice): its ``cosine``, the
        hit's score; with hybrid search the two sides the score fuses, ``cosine`` and ``bm25``.
        ``query`` may be a ``Query`` (queries.py) carrying its instruction and knobs."""
        given = self._require(self._query(query, instruction, {**(knobs or {}), **named_knobs}))
        if not hits:
            return []
        if self.query_knob is not None:
            documents = self._stored_documents(hits)
            return self.encoder.explain(given.text, given.instruction, documents, **given.knobs.given())
        return [
            {"cosine": hit.score}
            if hit.dense_score is None and hit.lexical_score is None
            else {"cosine": hit.dense_score, "bm25": hit.lexical_score}
            for hit in hits
        ]

    def _stored_documents(self, hits: list[SearchHit]) -> np.ndarray | list[str]:
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
        **named_knobs: float | None,
    ) -> list[SearchHit]:
        """Top-k chunks for a query text (embedded with one prefill) or a query vector.

        ``hybrid`` ("rrf" or "z") fuses the dense ranking with the full-text index's ranking of
        the query and the instruction; ``hybrid_weight`` is the lexical side's share (0..1).
        ``query_vector`` is the text's embedding when the caller has it already (the server).
        ``knobs``: the query-time knobs (name -> value, knobs.py's declarations; each also taken by
        name), only those the model takes; one left out is the model's own. The stored vectors are
        the same for every value: nothing is re-indexed.
        ``query`` may be a ``Query`` (queries.py: text, instruction and knobs, checked where it was made)."""
        if k < 1:
            raise BadInputError(f"k must be at least 1, got {k}.")
        hybrid, weight = check_hybrid(hybrid, hybrid_weight)
        text = isinstance(query, (str, Query))
        if hybrid is not None and not text:
            raise BadInputError(
                "Hybrid search needs the query text (its words go to the full-text index), not a vector."
            )
        knobs = {**(knobs or {}), **named_knobs}
        given = self._query(query, instruction, knobs) if text else None
        for knob in QueryKnobs.checked(knobs) if given is None else given.knobs:
            if query_vector is not None or given is None:
                raise BadInputError(
                    f"{knob} applies when the index embeds the query text; a query vector is already "
                    f"embedded: embed it with encoder.encode_queries(..., {knob}=...) instead."
                )
        if query_vector is not None:
            vector = np.asarray(query_vector, np.float32)
        elif given is not None:
            vector = self._embed(self._require(given))
        else:
            vector = np.asarray(query, np.float32)
        if vector.shape != (self.manifest.dimension,):
            raise BadInputError(
                f"The query vector has shape {vector.shape}; this index holds {self.manifest.dimension}-d vectors."
            )
        with self.catalog.transaction(write=False):  # one snapshot: ids and rows agree
            sources = self._matching_sources(filter or {})
            if hybrid is None:
                ranked = [(chunk_id, score) for chunk_id, score in self._ranked(vector, k, sources)]
            else:
                ranked = self._hybrid(vector, given.text, given.instruction, k, sources, hybrid, weight)
            rows = self.catalog.rows([chunk_id for chunk_id, *_ in ranked])
        return [
            SearchHit(score, rows[i].source, rows[i].position, rows[i].text, i, rows[i].extra, *sides)
            for i, score, *sides in ranked
            if i in rows
        ][:k]

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
