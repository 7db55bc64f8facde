"""An index folder as a retriever: set up once (k, filter, hybrid), asked per query.

    from instemb_rag.index.retrieval import IndexRetriever, hit_metadata
    with IndexRetriever.open(".instemb", k=5, filter={"source": "tents/*"}) as retriever:
        hits = retriever.retrieve("Which tent?", "focus on packed weight")      # SearchHit, best first
        hits = retriever.retrieve("Which tent?", "focus on weight", hybrid="rrf", k=3)  # per call
        hit_metadata(hits[0])     # {"source": ..., "position": ..., "chunk_id": ..., "page": ...}

What a framework's retriever wraps (the LlamaIndex integration's ``InstEmbRetriever``): it opens
the folder with the encoder the folder records, or with the one given (whose document side must be
the one that embedded the folder); reads a filter as ``Index.search`` does (``{"source": glob or
[globs]}``) or as a tree of conditions on ``source`` (``==`` and ``in``, joined by ``and`` / ``or``:
LlamaIndex's ``MetadataFilters`` as data, ``filters.model_dump(mode="json")``); checks the hybrid settings once;
takes the query's vector when the caller embedded it already (its cache, its events), the text then
being read by the full-text side only; and refuses to search once closed. Several threads may
retrieve at once (``Index.search`` reads one catalog snapshot per search).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InstEmbError
from ..queries import Query
from ..service.answer import encoder_embed, search
from ..service.request import QueryRequest
from .errors import BadInputError
from .fusion import check_hybrid
from .search import FILTER_KEYS, Index, SearchHit

__all__ = ["IndexRetriever", "hit_metadata", "hit_node_fields", "require_same_documents", "source_filter"]

FILTER_SUPPORTED = "key 'source' with operator == (EQ) or in (IN), combined with AND or OR"
SAME_DOCUMENTS_ADVICE = "Search it with the encoder it was built with, or re-index with this one."
BOOKKEEPING_KEYS = ("position", "chunk_id")  # where a chunk sits in the index, not what it says


class IndexRetriever:
    """Retrieves from an open ``Index`` (``open`` also opens a folder and closes it with itself)."""

    def __init__(
        self,
        index: Index,
        k: int = 5,
        filter: Mapping[str, Any] | None = None,
        hybrid: str | None = None,
        hybrid_weight: float | None = None,
        owns_index: bool = False,
        reopen: str = "IndexRetriever.open(index_dir)",
        encoder: Any = None,
    ):
        if k < 1:
            raise BadInputError(f"k must be at least 1, got {k}.")
        self.index, self.k, self.filter = index, k, source_filter(filter)
        self.encoder = index.encoder if encoder is None else encoder  # what embeds a query given as text
        self.hybrid, self.hybrid_weight = check_hybrid(hybrid, hybrid_weight)
        self.owns_index, self.closed = owns_index, False
        self.reopen = reopen  # how the caller opens another one (named when this one is closed)

    @classmethod
    def open(
        cls,
        index: Index | str | Path,
        encoder: Any = None,
        device: str = "auto",
        advice: str | None = None,
        filter_tree: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> IndexRetriever:
        """A retriever over ``index``: an open ``Index`` (left open by ``close``), or a folder, opened
        with ``encoder`` (None: the one the folder records, loaded on ``device``; ``advice``: what to
        pass when it cannot be) and closed by ``close``. ``filter_tree``: the filter as a tree of
        conditions (a framework's filters as data), instead of ``filter``. ``options``: ``__init__``'s."""
        from .recorded import ADVICE, recorded_encoder

        if filter_tree is not None:
            if options.get("filter") is not None:
                raise InstEmbError("Give filter= (a source glob, e.g. {'source': 'tents/*'}) or filters=, not both.")
            options["filter"] = filter_tree
        source_filter(options.get("filter"))  # a filter it cannot read fails before the folder opens
        if isinstance(index, Index):
            if encoder is not None:
                require_same_documents(index.manifest.stored_vectors_fingerprint, encoder)
            return cls(index, encoder=encoder, **options)
        if encoder is None:
            encoder = recorded_encoder(index, device, advice or ADVICE)
        opened = Index.open(index, encoder=encoder, device=device)
        try:
            return cls(opened, owns_index=True, **options)
        except BaseException:
            opened.close()
            raise

    def retrieve(
        self,
        query: str | Query | None = None,
        instruction: str | None = None,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        hybrid: str | None = None,
        hybrid_weight: float | None = None,
        knobs: Mapping[str, float | None] | None = None,
        query_vector: Any = None,
    ) -> list[SearchHit]:
        """The best ``k`` chunks for ``query`` under ``instruction`` (None: none), best first.

        ``k``, ``filter`` and ``hybrid`` (with ``hybrid_weight``) default to the retriever's own.
        ``knobs``: the model's query-time knobs, name -> value (knobs.py; a ``QueryKnobs`` as checked
        where it entered), when the retriever embeds the query.
        ``query_vector``: the query already embedded (then no knob): a dense search needs no text;
        a hybrid one reads the text and instruction on its full-text side."""
        self._require_open()
        mode, weight = (self.hybrid, self.hybrid_weight) if hybrid is None else check_hybrid(hybrid, hybrid_weight)
        where = self.filter if filter is None else source_filter(filter)
        options = {"k": self.k if k is None else k, "filter": where, "hybrid": mode, "hybrid_weight": weight}
        if mode is None:
            options["hybrid_weight"] = None
        if isinstance(query, Query):
            request = QueryRequest(query_vector=query_vector, **options).with_query(query)
        else:
            request = QueryRequest(query, instruction, knobs=knobs or {}, query_vector=query_vector, **options)
        return search(request, self.index, encoder_embed(self.encoder), who="the retriever").hits

    def query_encoder(self, advice: str) -> Any:
        """The encoder that embeds a query given as text; an ``Index`` opened without one is refused,
        ``advice`` saying what to pass instead."""
        if self.encoder is None:
            raise InstEmbError(f"This Index was opened without an encoder: {advice}")
        return self.encoder

    @property
    def encoder_reference(self) -> str | None:
        """Where the encoder loads again (None: the default model): what the folder records, if it
        is a folder here (recorded.reloadable_reference), e.g. for a framework's saved embedding."""
        from .recorded import reloadable_reference

        return reloadable_reference(self.index)

    async def aretrieve(self, *args: Any, **kwargs: Any) -> list[SearchHit]:
        """``retrieve`` in a worker thread (the catalog read and the search stay off the event loop)."""
        return await asyncio.to_thread(self.retrieve, *args, **kwargs)

    def _require_open(self) -> None:
        if self.closed:
            raise InstEmbError(
                "This retriever was closed (close(), or the end of its `with` block), and its index folder "
                f"with it: open a new one with {self.reopen}."
            )

    def close(self) -> None:
        """Close the index folder if this retriever opened it (twice is harmless)."""
        if self.owns_index and not self.closed:
            self.index.close()
            self.closed = True

    def __enter__(self) -> IndexRetriever:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def hit_metadata(hit: SearchHit) -> dict[str, Any]:
    """A hit's metadata: ``source``, ``position``, ``chunk_id`` and its extras (e.g. a PDF's page)."""
    return {"source": hit.source, "position": hit.position, "chunk_id": hit.chunk_id, **(hit.extra or {})}


def hit_node_fields(hit: SearchHit) -> dict[str, Any]:
    """A hit as a framework's text node takes it (LlamaIndex's ``TextNode`` field names): its text, an
    id (``source#position``), its metadata, and metadata modes that say what the index did: it
    embedded the chunk text alone, and an LLM is shown the source (and page) but not the bookkeeping
    (position, chunk_id)."""
    metadata = hit_metadata(hit)
    return {
        "text": hit.text,
        "id_": f"{hit.source}#{hit.position}",
        "metadata": metadata,
        "excluded_embed_metadata_keys": list(metadata),
        "excluded_llm_metadata_keys": list(BOOKKEEPING_KEYS),
    }


def require_same_documents(documents_fingerprint: str, encoder: Any, advice: str = SAME_DOCUMENTS_ADVICE) -> None:
    """Queries are compared with documents of the same document side (``encoder.document_fingerprint``),
    or their scores mean nothing; another query side over the same documents searches them as they are."""
    if encoder.document_fingerprint != documents_fingerprint:
        raise InstEmbError(
            f"The index's documents were embedded by document side {documents_fingerprint}, but the "
            f"query model's documents are embedded by {encoder.document_fingerprint} (encoder "
            f"{encoder.fingerprint}). {advice}"
        )


# ---------------------------------------------------------------------------------------- filters
def source_filter(filter: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``Index.search``'s filter: ``{"source": glob or [globs]}`` as given (its keys checked), or a
    tree of conditions (``{"filters": [...], "condition": "and"}``) as the exact sources it allows."""
    if filter is None:
        return None
    if "filters" not in filter:
        unknown = [key for key in filter if key not in FILTER_KEYS]
        if unknown:
            raise BadInputError(f"Cannot filter on {unknown[0]!r}: an index filters on {', '.join(FILTER_KEYS)}.")
        return dict(filter)
    sources = allowed_sources(filter)
    return None if sources is None else {"source": [_literal_glob(source) for source in sorted(sources)]}


def allowed_sources(tree: Mapping[str, Any]) -> set[str] | None:
    """The sources a chunk's file must be one of (None: any). Any other key or operator is refused,
    saying what is supported, rather than ignored."""
    parts = [allowed_sources(part) if "filters" in part else _one_condition(part) for part in tree["filters"]]
    parts = [part for part in parts if part is not None]
    condition = tree.get("condition") or "and"
    if not parts:
        return None
    if condition == "and":
        return set.intersection(*parts)
    if condition == "or":
        return set.union(*parts)
    raise BadInputError(
        f"An instemb-rag index folder cannot filter with condition {condition!r}; it supports {FILTER_SUPPORTED}."
    )


def _one_condition(condition: Mapping[str, Any]) -> set[str]:
    key, value, operator = condition.get("key"), condition.get("value"), condition.get("operator") or "=="
    if key != "source":
        raise BadInputError(
            f"An instemb-rag index folder cannot filter on metadata key {key!r}: its stores hold each chunk's "
            f"source file only. Supported: {FILTER_SUPPORTED}."
        )
    if operator == "==" and isinstance(value, str):
        return {value}
    if operator == "in" and isinstance(value, list):
        return {str(item) for item in value}
    raise BadInputError(
        f"An instemb-rag index folder cannot filter 'source' with operator {operator!r} and value {value!r}. "
        f"Supported: {FILTER_SUPPORTED} (a string for ==, a list for in)."
    )


def _literal_glob(name: str) -> str:
    """A source name as a glob matching only itself (``Index.search`` reads filters as globs)."""
    return re.sub(r"([*?\[])", r"[\1]", name)
