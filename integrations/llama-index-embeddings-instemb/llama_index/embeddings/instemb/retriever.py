"""InstEmbRetriever: a LlamaIndex retriever that takes an instruction with every call.

    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)
    retriever.retrieve("best tent for storms", instruction="Focus on durability.")
    await retriever.aretrieve("best tent for storms", instruction="Focus on weight.", llm_weight=0.8)
    with InstEmbRetriever.from_instemb_index(".instemb", similarity_top_k=5, hybrid="rrf") as retriever:
        retriever.retrieve("best tent for storms", instruction="Focus on durability.", instruction_strength=2)

The query is embedded once under the instruction (InstEmbEmbedding: cached, reported), and the
embedding is searched by LlamaIndex's own retriever over a VectorStoreIndex (FAISS, Qdrant, the
simple store, ...) or by instemb_rag's over an ``instemb-rag index`` folder (instemb_rag/index/
retrieval.py: the folder's encoder, filters, hybrid search); the hits become LlamaIndex nodes.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import MetadataFilters

from instemb_rag.errors import InstEmbError
from instemb_rag.index.retrieval import IndexRetriever, hit_metadata, require_same_documents

from .base import InstEmbEmbedding
from .query import InstructionQueryBundle

_UNSET: Any = object()

# What to pass when an index folder's recorded model cannot be reopened (instemb_rag.index.recorded).
RECORDED_ADVICE = (
    "Pass the model it was built with: embed_model=InstEmbEmbedding(model_path, pooling=..., "
    "lookahead_length=..., max_length=..., precision=...) with the settings of the encoder that "
    "indexed it, or InstEmbEmbedding.from_encoder(that encoder)."
)
SAME_DOCUMENTS_ADVICE = "Use the index's own embed model (leave embed_model=None) or re-index with this one."


class InstEmbRetriever(BaseRetriever):
    """Retrieve with a per-call instruction over a VectorStoreIndex or an instemb-rag index folder.

    Built by ``from_vector_store_index`` or ``from_instemb_index``. ``retrieve(query, instruction=None,
    llm_weight=None, instruction_strength=None)``: None means the embed model's own (its
    ``query_instruction``; its knobs), "" no instruction; ``llm_weight`` (a two-space model's LLM share,
    0..1) and ``instruction_strength`` (an instruction-effect model's, 0..10; 0: plain search) hold for
    this call, over the same stored documents. A QueryBundle or InstructionQueryBundle works too.
    """

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
        from the same document side as ``embed_model``'s (None: the index's own)."""
        index_model = index._embed_model
        if not isinstance(index_model, InstEmbEmbedding) and embed_model is None:
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
        """Search an ``instemb-rag index`` folder (a path) or an open ``instemb_rag.index.Index``.

        Without ``embed_model`` the encoder the index records is loaded; with one, its document side
        must be the index's. ``filter``: e.g. ``{"source": "tents/*"}`` (a glob); or ``filters``:
        LlamaIndex MetadataFilters on ``source`` (``==``, ``in``; AND / OR). ``hybrid`` ("rrf" or "z")
        and ``hybrid_weight`` fuse the index's full-text ranking in, as ``instemb-rag query --hybrid``.
        Threads and event loops may share the retriever; ``close()`` (or ``with``) releases a folder it opened.
        """
        if filter is not None and filters is not None:
            raise InstEmbError(
                "Give filter= (a source glob, e.g. {'source': 'tents/*'}) or filters= (LlamaIndex MetadataFilters), "
                "not both."
            )
        backend = IndexRetriever.open(
            index,
            None if embed_model is None else embed_model.encoder,
            device,
            RECORDED_ADVICE,
            k=similarity_top_k,
            filter=filter if filters is None else filters.model_dump(mode="json"),
            hybrid=hybrid,
            hybrid_weight=hybrid_weight,
            reopen="InstEmbRetriever.from_instemb_index(...)",
        )
        if embed_model is None:
            from instemb_rag.index.recorded import reloadable_reference

            if backend.encoder is None:
                raise InstEmbError("This Index was opened without an encoder: pass embed_model=InstEmbEmbedding(...).")
            embed_model = InstEmbEmbedding.from_encoder(backend.encoder, model_path=reloadable_reference(backend.index))
        return cls(embed_model, backend, **kwargs)

    def close(self) -> None:
        """Release the index folder ``from_instemb_index`` opened. A VectorStoreIndex's store is not the
        retriever's: close it where it was made (``store.close()``, ``with qdrant_vector_store(...)``)."""
        if isinstance(self.backend, IndexRetriever):
            self.backend.close()

    def __enter__(self) -> InstEmbRetriever:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def retrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        return super().retrieve(bundle_with_instruction(query, instruction, llm_weight, instruction_strength))

    async def aretrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        return await super().aretrieve(bundle_with_instruction(query, instruction, llm_weight, instruction_strength))

    # ------------------------------------------------------------------ BaseRetriever hooks
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.embedding is None:
            embedding = self.embed_model.get_agg_embedding_from_queries(query_bundle.embedding_strs)
            query_bundle = replace(query_bundle, embedding=embedding)
        return self._search(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.embedding is None:
            embedding = await self.embed_model.aget_agg_embedding_from_queries(query_bundle.embedding_strs)
            query_bundle = replace(query_bundle, embedding=embedding)
        return await asyncio.to_thread(self._search, query_bundle)  # every store, sync-only ones too

    def _search(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not isinstance(self.backend, IndexRetriever):
            return self.backend.retrieve(query_bundle)  # a VectorStoreIndex's: the bundle's embedding as given
        # A hybrid search's full-text side reads the instruction the query was embedded under.
        carried = query_bundle.instruction if isinstance(query_bundle, InstructionQueryBundle) else None
        instruction = self.embed_model.resolve_instruction(carried)
        hits = self.backend.retrieve(query_bundle.query_str, instruction, query_vector=query_bundle.embedding)
        return [NodeWithScore(node=_hit_node(hit), score=float(hit.score)) for hit in hits]


def _hit_node(hit: Any) -> TextNode:
    """A hit as a node whose metadata modes say what the index did: it embedded the chunk text alone,
    and an LLM is shown the source (and page) but not the bookkeeping (position, chunk_id)."""
    metadata = hit_metadata(hit)
    return TextNode(
        text=hit.text,
        id_=f"{hit.source}#{hit.position}",
        metadata=metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=["position", "chunk_id"],
    )


def bundle_with_instruction(
    query: str | QueryBundle,
    instruction: str | None = _UNSET,
    llm_weight: float | None = None,
    instruction_strength: float | None = None,
) -> QueryBundle:
    """The query with the call's instruction and knobs attached; a call's argument wins over the bundle's own."""
    if not isinstance(query, (str, QueryBundle)):
        raise InstEmbError(f"query must be a string or a QueryBundle, got {type(query).__name__}.")
    given = {"llm_weight": llm_weight, "instruction_strength": instruction_strength}
    given = {name: value for name, value in given.items() if value is not None}
    if instruction is not _UNSET:
        given["instruction"] = instruction
    if isinstance(query, str):
        return InstructionQueryBundle(query_str=query, **given)
    if not given:
        return query
    if query.embedding is not None:
        raise InstEmbError(
            f"The QueryBundle already carries an embedding, so {' and '.join(given)} cannot change it. Pass the "
            "query string with instruction=... (and llm_weight=... or instruction_strength=...), or a bundle "
            "without an embedding."
        )
    own = {}
    if isinstance(query, InstructionQueryBundle):
        own = {"instruction": query.instruction, **query.knobs.given()}
    return InstructionQueryBundle(
        query.query_str, custom_embedding_strs=query.custom_embedding_strs, **{**own, **given}
    )
