"""LlamaIndex retrievers that take an instruction with every call: InstEmbRetriever embeds the query
(InstEmbEmbedding: cached, reported) and searches with LlamaIndex's retriever or, over an index folder,
instemb_rag's IndexRetriever (its filters, hybrid search); InstructionFusionRetriever's sub-queries
keep the instruction."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import MetadataFilters

from instemb_rag.client.carried import carried_by
from instemb_rag.client.sources import recorded_model_advice
from instemb_rag.errors import InstEmbError
from instemb_rag.index.retrieval import IndexRetriever, hit_node_fields, require_same_documents

from .base import Closes, InstEmbEmbedding  # (Closes: instemb_rag.client.adapters')
from .query import InstructionQueryBundle, TakesInstructions, instruction_of

# What to pass when an index folder's recorded model cannot be reopened (instemb_rag.index.recorded).
RECORDED_ADVICE = recorded_model_advice("embed_model=InstEmbEmbedding", "InstEmbEmbedding.from_encoder")
SAME_DOCUMENTS_ADVICE = "Use the index's own embed model (embed_model=None) or re-index with this one."


class InstEmbRetriever(Closes, TakesInstructions, BaseRetriever):
    """Retrieve with a per-call instruction and knobs (TakesInstructions) over a VectorStoreIndex or an
    instemb-rag index folder; built by ``from_vector_store_index`` or ``from_instemb_index``."""

    def __init__(
        self,
        embed_model: InstEmbEmbedding,
        backend: BaseRetriever | IndexRetriever,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ):
        if not isinstance(embed_model, InstEmbEmbedding):
            raise InstEmbError(f"InstEmbRetriever needs an InstEmbEmbedding, got {type(embed_model).__name__}.")
        self.embed_model, self.backend = embed_model, backend
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_vector_store_index(
        cls,
        index: VectorStoreIndex,
        embed_model: InstEmbEmbedding | None = None,
        similarity_top_k: int = 5,
        filters: MetadataFilters | None = None,
        **kwargs: Any,
    ) -> InstEmbRetriever:
        """Search ``index`` (any vector store) with LlamaIndex's retriever; its documents must come
        from ``embed_model``'s document side (None: the index's own embed model)."""
        index_model = index._embed_model
        if embed_model is None and not isinstance(index_model, InstEmbEmbedding):
            raise InstEmbError(
                f"The index was built with {type(index_model).__name__}, not InstEmbEmbedding: "
                "pass embed_model=InstEmbEmbedding(...) when you build the VectorStoreIndex "
                "(or set Settings.embed_model) so documents and queries share one embedding space."
            )
        embed_model = embed_model or index_model
        if isinstance(index_model, InstEmbEmbedding):
            require_same_documents(index_model.document_fingerprint, embed_model.encoder, SAME_DOCUMENTS_ADVICE)
        return cls(embed_model, index.as_retriever(similarity_top_k=similarity_top_k, filters=filters), **kwargs)

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
        """Search an ``instemb-rag index`` folder (a path, released by ``close()`` or ``with``) or an open
        ``Index``, with the encoder it records or ``embed_model`` (of the same document side); ``filter``
        (``{"source": "tents/*"}``) or ``filters`` (MetadataFilters on ``source``: ==, in; AND, OR);
        ``hybrid`` ("rrf", "z") and ``hybrid_weight`` as ``instemb-rag query --hybrid``. Thread-safe."""
        encoder = None if embed_model is None else embed_model.encoder
        where = {"filter": filter, "filter_tree": None if filters is None else filters.model_dump(mode="json")}
        options = {"k": similarity_top_k, "hybrid": hybrid, "hybrid_weight": hybrid_weight, **where}
        reopen = "InstEmbRetriever.from_instemb_index(...)"
        backend = IndexRetriever.open(index, encoder, device, RECORDED_ADVICE, reopen=reopen, **options)
        if embed_model is None:
            encoder = backend.query_encoder("pass embed_model=InstEmbEmbedding(...).")
            embed_model = InstEmbEmbedding.from_encoder(encoder, model_path=backend.encoder_reference)
        return cls(embed_model, backend, **kwargs)

    def close(self) -> None:
        """Release the index folder ``from_instemb_index`` opened (a vector store is closed where it was made)."""
        if isinstance(self.backend, IndexRetriever):
            self.backend.close()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.embedding is None:
            embedding = self.embed_model.get_agg_embedding_from_queries(query_bundle.embedding_strs)
            query_bundle = replace(query_bundle, embedding=embedding)
        if not isinstance(self.backend, IndexRetriever):
            return self.backend.retrieve(query_bundle)  # LlamaIndex's: the bundle's embedding as given
        # A hybrid search's full-text side reads the instruction the query was embedded under.
        instruction = self.embed_model.resolve_instruction(instruction_of(query_bundle.query_str))
        hits = self.backend.retrieve(query_bundle.query_str, instruction, query_vector=query_bundle.embedding)
        return [NodeWithScore(node=hit_node(hit), score=float(hit.score)) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)  # every store, sync-only ones too


def hit_node(hit: Any) -> TextNode:
    """A hit as a node whose metadata modes say what the index did (instemb_rag's hit_node_fields)."""
    return TextNode(**hit_node_fields(hit))


class InstructionFusionRetriever(TakesInstructions, QueryFusionRetriever):
    """QueryFusionRetriever (same prompt, modes, weights, async) whose LLM-made sub-queries keep the
    original query's instruction and knobs, which its query string carries (LlamaIndex's sub-queries
    are plain bundles, embedded under the default)."""

    def _get_queries(self, original_query: str) -> list[QueryBundle]:
        return sub_queries(original_query, super()._get_queries(original_query))

    async def _aget_queries(self, original_query: str) -> list[QueryBundle]:
        return sub_queries(original_query, await super()._aget_queries(original_query))


def sub_queries(original: str, generated: list[QueryBundle]) -> list[QueryBundle]:
    """The LLM's sub-queries under the instruction and knobs the original query string carries."""
    return [InstructionQueryBundle(bundle.query_str, **carried_by(original)) for bundle in generated]
