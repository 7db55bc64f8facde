"""InstEmbRetriever: a LlamaIndex retriever that takes an instruction with every call.

    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)
    retriever.retrieve("best tent for storms", instruction="Focus on durability.")
    await retriever.aretrieve("best tent for storms", instruction="Focus on weight.")
    retriever.retrieve("best tent for storms", instruction="Focus on durability.", llm_weight=0.8)  # two spaces
    retriever.retrieve("best tent for storms", instruction="Focus on durability.", instruction_strength=2)  # effect

The query is embedded once under the instruction (cached), and the embedding goes to a
search backend: a LlamaIndex VectorStoreIndex (FAISS, Qdrant, the simple store, ...) or an
index folder written by ``instemb-rag index``:

    with InstEmbRetriever.from_instemb_index(".instemb", similarity_top_k=5) as retriever:
        retriever.retrieve("best tent for storms", instruction="Focus on durability.")
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import MetadataFilters

from instemb_rag.errors import InstEmbError

from .base import InstEmbEmbedding
from .filters import allowed_sources, as_index_filter
from .query import InstructionQueryBundle

_UNSET: Any = object()

# What to pass when an index folder's recorded model cannot be reopened (instemb_rag.index.recorded).
RECORDED_ADVICE = (
    "Pass the model it was built with: embed_model=InstEmbEmbedding(model_path, pooling=..., "
    "lookahead_length=..., max_length=..., precision=...) with the settings of the encoder that "
    "indexed it, or InstEmbEmbedding.from_encoder(that encoder)."
)


class SearchBackend(Protocol):
    """Finds the nodes nearest to a finished query embedding."""

    def search(self, query: QueryBundle) -> list[NodeWithScore]: ...

    async def asearch(self, query: QueryBundle) -> list[NodeWithScore]: ...


class VectorStoreIndexBackend:
    """Searches a LlamaIndex VectorStoreIndex with LlamaIndex's own VectorIndexRetriever."""

    def __init__(self, index: VectorStoreIndex, similarity_top_k: int, filters: MetadataFilters | None):
        self._retriever = index.as_retriever(similarity_top_k=similarity_top_k, filters=filters)
        # A QdrantVectorStore given a sync client only (the usual in-memory / local-path set-up)
        # raises on aquery; search those in a worker thread instead. qdrant_vector_store()'s
        # stores answer async calls themselves (qdrant_store.py).
        store = index.vector_store
        self._sync_only = getattr(store, "_aclient", _UNSET) is None and not getattr(store, "answers_async", False)

    def search(self, query: QueryBundle) -> list[NodeWithScore]:
        return self._retriever.retrieve(query)

    async def asearch(self, query: QueryBundle) -> list[NodeWithScore]:
        if self._sync_only:
            return await asyncio.to_thread(self._retriever.retrieve, query)
        return await self._retriever.aretrieve(query)


class InstEmbIndexBackend:
    """Searches an index folder written by ``instemb-rag index`` (FAISS or Qdrant inside).

    Hits become TextNodes with the chunk text and metadata ``source``, ``position`` and
    ``chunk_id`` (plus any extras such as a PDF page).
    """

    def __init__(
        self,
        index: Any,
        similarity_top_k: int,
        filter: dict[str, str] | None,
        owns_index: bool,
        filters: MetadataFilters | None = None,
        hybrid: dict | None = None,
    ):
        self.index = index
        self.similarity_top_k = similarity_top_k
        self.filter = _index_filter(filter, filters)
        self._owns_index = owns_index
        self._closed = False
        self.hybrid = hybrid  # {"hybrid", "hybrid_weight", "resolve_instruction"}: Index.search's hybrid search

    def search(self, query: QueryBundle) -> list[NodeWithScore]:
        if self._closed:
            raise InstEmbError(
                "This retriever was closed (close(), or the end of its `with` block), and its index folder "
                "with it: open a new one with InstEmbRetriever.from_instemb_index(...)."
            )
        vector = np.asarray(query.embedding, dtype=np.float32)
        if self.hybrid is not None:  # the full-text side reads the query text and the instruction it was embedded under
            instruction = self.hybrid["resolve_instruction"](getattr(query, "instruction", None))
            hits = self.index.search(
                query.query_str,
                instruction,
                k=self.similarity_top_k,
                filter=self.filter,
                hybrid=self.hybrid["hybrid"],
                hybrid_weight=self.hybrid["hybrid_weight"],
                query_vector=vector,
            )
            return [NodeWithScore(node=_hit_node(hit), score=float(hit.score)) for hit in hits]
        hits = self.index.search(vector, k=self.similarity_top_k, filter=self.filter)
        return [NodeWithScore(node=_hit_node(hit), score=float(hit.score)) for hit in hits]

    async def asearch(self, query: QueryBundle) -> list[NodeWithScore]:
        # The Index may be searched from any thread (its catalog serialises searches), so the
        # catalog read and vector lookup run off the event loop too.
        return await asyncio.to_thread(self.search, query)

    def close(self) -> None:
        if self._owns_index and not self._closed:
            self.index.close()
            self._closed = True


def _index_filter(filter: dict[str, str] | None, filters: MetadataFilters | None) -> dict | None:
    """Index.search's filter from ``filter={"source": glob}`` or LlamaIndex MetadataFilters."""
    if filters is None:
        return filter
    if filter is not None:
        raise InstEmbError(
            "Give filter= (a source glob, e.g. {'source': 'tents/*'}) or filters= (LlamaIndex MetadataFilters), "
            "not both."
        )
    sources = allowed_sources(filters)
    return None if sources is None else as_index_filter(sources)


def _hit_node(hit: Any) -> TextNode:
    """The hit as a node whose metadata modes say what the index did: it embedded the chunk text
    alone (MetadataMode.EMBED gives just the text), and an LLM is shown the source (and page) but
    not the bookkeeping (position, chunk_id)."""
    metadata = {"source": hit.source, "position": hit.position, "chunk_id": hit.chunk_id, **(hit.extra or {})}
    return TextNode(
        text=hit.text,
        id_=f"{hit.source}#{hit.position}",
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=["position", "chunk_id"],
    )


class InstEmbRetriever(BaseRetriever):
    """Retrieve with a per-call instruction over a VectorStoreIndex or an instemb-rag index.

    Use the constructors ``from_vector_store_index`` and ``from_instemb_index``.
    ``retrieve(query, instruction=None, llm_weight=None)``: None means the embed model's
    ``query_instruction``, "" means no instruction; ``llm_weight`` (a two-space model only) is the
    LLM space's share of the score for this call (None: the embed model's own; the documents are
    stored with both halves, so every weight searches the same index); ``instruction_strength`` (an
    instruction-effect model only) is how much the instruction moves the ranking for this call
    (0..10; 0: plain search; None: the embed model's own). A plain QueryBundle or an
    InstructionQueryBundle works too.
    """

    def __init__(
        self,
        embed_model: InstEmbEmbedding,
        backend: SearchBackend,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ):
        if not isinstance(embed_model, InstEmbEmbedding):
            raise InstEmbError(f"InstEmbRetriever needs an InstEmbEmbedding, got {type(embed_model).__name__}.")
        self.embed_model = embed_model
        self.backend = backend
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_vector_store_index(
        cls,
        index: VectorStoreIndex,
        embed_model: InstEmbEmbedding | None = None,
        similarity_top_k: int = 5,
        filters: MetadataFilters | None = None,
        **kwargs: Any,
    ) -> InstEmbRetriever:
        """Search ``index`` (any vector store). Its documents must come from the same encoder."""
        index_model = getattr(index, "_embed_model", None)
        if embed_model is None:
            if not isinstance(index_model, InstEmbEmbedding):
                raise InstEmbError(
                    f"The index was built with {type(index_model).__name__}, not InstEmbEmbedding: "
                    "pass embed_model=InstEmbEmbedding(...) when you build the VectorStoreIndex "
                    "(or set Settings.embed_model) so documents and queries share one embedding space."
                )
            embed_model = index_model
        if isinstance(index_model, InstEmbEmbedding):
            _check_same_encoder(embed_model, index_model.document_fingerprint)
        backend = VectorStoreIndexBackend(index, similarity_top_k, filters)
        return cls(embed_model, backend, **kwargs)

    @classmethod
    def from_instemb_index(
        cls,
        index: Any,
        embed_model: InstEmbEmbedding | None = None,
        similarity_top_k: int = 5,
        filter: dict[str, str] | None = None,
        device: str = "auto",
        filters: MetadataFilters | None = None,
        hybrid: str | None = None,
        hybrid_weight: float | None = None,
        **kwargs: Any,
    ) -> InstEmbRetriever:
        """Search an ``instemb-rag index`` folder (a path) or an open ``instemb_rag.index.Index``.

        Without ``embed_model`` the encoder recorded in the index is loaded; with one, its
        fingerprint must match the index's. ``filter`` is e.g. ``{"source": "tents/*"}`` (a glob);
        ``filters`` LlamaIndex MetadataFilters on ``source`` (``==``, ``in``; AND / OR; filters.py).
        ``hybrid`` ("rrf" or "z") and ``hybrid_weight`` fuse the index's full-text ranking in, as
        ``instemb-rag query --hybrid`` does. The retriever may be used from several threads and
        event loops at once.
        Call ``close()`` (or use ``with``) to release an index folder the retriever opened.
        """
        from instemb_rag.index import Index
        from instemb_rag.index.recorded import recorded_encoder, reloadable_reference

        owns_index = not isinstance(index, Index)
        if owns_index:
            # The folder's recorded model, loaded once and checked against the folder's fingerprint.
            encoder = recorded_encoder(index, device, RECORDED_ADVICE) if embed_model is None else embed_model.encoder
            index = Index.open(index, encoder=encoder, device=device)
        elif embed_model is not None and index.encoder is not None:
            _check_same_encoder(embed_model, index.encoder.document_side.fingerprint)
        if embed_model is None:
            if index.encoder is None:
                raise InstEmbError("This Index was opened without an encoder: pass embed_model=InstEmbEmbedding(...).")
            embed_model = InstEmbEmbedding.from_encoder(index.encoder, model_path=reloadable_reference(index))
        settings = None
        if hybrid is not None or hybrid_weight is not None:
            settings = {
                "hybrid": hybrid,
                "hybrid_weight": hybrid_weight,
                "resolve_instruction": embed_model.resolve_instruction,
            }
        backend = InstEmbIndexBackend(index, similarity_top_k, filter, owns_index, filters, settings)
        return cls(embed_model, backend, **kwargs)

    def close(self) -> None:
        """Release what the retriever opened: an index folder's lock and catalog (from_instemb_index
        with a path). A VectorStoreIndex's store is not the retriever's: close it where it was made
        (``store.close()``, or ``with qdrant_vector_store(...) as store``)."""
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> InstEmbRetriever:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ public API
    def retrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        return super().retrieve(self._bundle(query, instruction, llm_weight, instruction_strength))

    async def aretrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        return await super().aretrieve(self._bundle(query, instruction, llm_weight, instruction_strength))

    def _bundle(
        self,
        query: str | QueryBundle,
        instruction: str | None,
        llm_weight: float | None,
        instruction_strength: float | None = None,
    ) -> QueryBundle:
        # The bundle checks its instruction and knobs; the embedding call, that the model takes them.
        return bundle_with_instruction(query, instruction, llm_weight, instruction_strength)

    # ------------------------------------------------------------------ BaseRetriever hooks
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.embedding is None:
            strings = _embedding_strings(query_bundle)
            query_bundle = _with_embedding(query_bundle, self.embed_model.get_agg_embedding_from_queries(strings))
        return self.backend.search(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.embedding is None:
            strings = _embedding_strings(query_bundle)
            embedding = await self.embed_model.aget_agg_embedding_from_queries(strings)
            query_bundle = _with_embedding(query_bundle, embedding)
        return await self.backend.asearch(query_bundle)


def bundle_with_instruction(
    query: str | QueryBundle,
    instruction: str | None = _UNSET,
    llm_weight: float | None = None,
    instruction_strength: float | None = None,
) -> QueryBundle:
    """Attach the call's instruction (and llm_weight, instruction_strength); an explicit argument
    wins over the bundle's own."""
    if isinstance(query, str):
        return InstructionQueryBundle(
            query_str=query,
            instruction=None if instruction is _UNSET else instruction,
            llm_weight=llm_weight,
            instruction_strength=instruction_strength,
        )
    if not isinstance(query, QueryBundle):
        raise InstEmbError(f"query must be a string or a QueryBundle, got {type(query).__name__}.")
    if instruction is _UNSET and llm_weight is None and instruction_strength is None:
        return query
    if query.embedding is not None:
        what = (
            "an instruction"
            if instruction is not _UNSET
            else ("an llm_weight" if llm_weight is not None else "an instruction_strength")
        )
        raise InstEmbError(
            f"The QueryBundle already carries an embedding, so {what} cannot change it. Pass the query string "
            "with instruction=... (and llm_weight=... or instruction_strength=...), or a bundle without an embedding."
        )
    return InstructionQueryBundle(
        query_str=query.query_str,
        custom_embedding_strs=query.custom_embedding_strs,
        instruction=getattr(query, "instruction", None) if instruction is _UNSET else instruction,
        llm_weight=getattr(query, "llm_weight", None) if llm_weight is None else llm_weight,
        instruction_strength=(
            getattr(query, "instruction_strength", None) if instruction_strength is None else instruction_strength
        ),
    )


def _embedding_strings(query_bundle: QueryBundle) -> list[str]:
    """The bundle's strings (an InstructionQueryBundle's carry its instruction); several (HyDE,
    custom_embedding_strs) are embedded in one batch and averaged, as LlamaIndex does."""
    strings = query_bundle.embedding_strs
    if not strings or not all(string.strip() for string in strings):
        raise InstEmbError("The query is empty: give a non-empty query string (and no empty custom_embedding_strs).")
    return strings


def _with_embedding(query_bundle: QueryBundle, embedding: list[float]) -> InstructionQueryBundle:
    return InstructionQueryBundle(
        query_str=query_bundle.query_str,
        custom_embedding_strs=query_bundle.custom_embedding_strs,
        instruction=getattr(query_bundle, "instruction", None),
        embedding=embedding,
        llm_weight=getattr(query_bundle, "llm_weight", None),
        instruction_strength=getattr(query_bundle, "instruction_strength", None),
    )


def _check_same_encoder(embed_model: InstEmbEmbedding, documents_fingerprint: str) -> None:
    """Queries and documents must come from the same document side (encoder.document_side), or
    scores mean nothing; another query side over the same documents searches them as they are."""
    if documents_fingerprint != embed_model.document_fingerprint:
        raise InstEmbError(
            f"The index's documents were embedded by document side {documents_fingerprint}, but the "
            f"query model's documents are embedded by {embed_model.document_fingerprint} (encoder "
            f"{embed_model.fingerprint}). Use the index's own embed model (leave embed_model=None) or "
            "re-index with this one."
        )
