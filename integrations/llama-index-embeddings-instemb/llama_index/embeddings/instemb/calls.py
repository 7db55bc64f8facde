"""The embedding calls of InstEmbEmbedding (base.py holds its fields, loading and lifetime).

Queries: LlamaIndex's own paths pass strings only (an ``InstructedText`` carries its instruction
and knobs); ``get_query_embeddings(queries, instructions, llm_weight, instruction_strength)`` and
``get_query_embedding_for`` take them per call, ``query_bundle`` returns a bundle whose embedding
already reflects them. A call's inputs are checked once, here, where they enter (texts: inputs.py;
instructions: instemb_rag.instructions; knobs: instemb_rag.queries), and the embedder
(instemb_rag/client/embedder.py) takes them as they are. Documents: in slices of
``embed_batch_size``, under ``text_instruction``, through the document cache. Every call is
reported with its instructions (events.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence

import llama_index.core.instrumentation as instrument
from llama_index.core.base.embeddings.base import Embedding, mean_agg

from instemb_rag.client.caches import DocumentEmbeddingCache, QueryEmbeddingCache
from instemb_rag.instructions import normalize_instruction, per_item_instructions
from instemb_rag.queries import QueryKnobs

from .events import embedding_call
from .inputs import check_texts
from .node_parser import FILE_METADATA_KEYS, InstEmbNodeParser, node_parser_for
from .query import InstructionQueryBundle, instruction_of, knobs_of

dispatcher = instrument.get_dispatcher(__name__)


class EmbeddingCalls:
    """InstEmbEmbedding's query and document calls (a mixin: it reads the model's fields)."""

    # ------------------------------------------------------------------ caches and chunking
    @property
    def query_cache(self) -> QueryEmbeddingCache:
        return self._embedder.query_cache

    @property
    def document_cache(self) -> DocumentEmbeddingCache | None:
        """The document-embedding cache over ``embeddings_cache`` (None without one)."""
        return self._embedder.document_cache

    @property
    def document_fingerprint(self) -> str:
        """The fingerprint of the encoder's document side, which the document cache keys on: another
        query side over the same documents (a two-tower or two-space model) reuses their vectors. A
        server's is the one its model card reports."""
        return self._embedder.document_fingerprint

    @property
    def document_token_limit(self) -> int:
        """Tokens of a document (node text plus the metadata LlamaIndex embeds with it) the model
        reads; the rest is cut (with a TruncationWarning): the encoder's ``document_side.token_limit``
        (its most restrictive part's, in that part's tokens), less a document instruction's tokens."""
        return self._embedder.document_token_limit(self._document_instruction)

    @property
    def recommended_chunk_size(self) -> int:
        """The node parser's chunk size, in the tokens of the model that embeds documents: the
        CLI's (``instemb-rag index`` chunks at 256), or the document limit if that is smaller."""
        from instemb_rag.index.documents import DEFAULT_CHUNK_SIZE

        return min(DEFAULT_CHUNK_SIZE, self.document_token_limit)

    def node_parser(
        self,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        excluded_embed_metadata_keys: Sequence[str] = FILE_METADATA_KEYS,
        **kwargs: Any,
    ) -> InstEmbNodeParser:
        """LlamaIndex's SentenceSplitter on the model's own tokens, sized so the model reads each
        node whole, as ``instemb-rag index`` splits (node_parser.py). Pass it as
        ``transformations=[embed_model.node_parser()]``.

        ``chunk_size`` defaults to ``recommended_chunk_size``; one over ``document_token_limit``
        is refused. ``chunk_overlap`` defaults to the CLI's 32 (a quarter of a smaller chunk).
        ``excluded_embed_metadata_keys`` (default: what SimpleDirectoryReader adds, file_path
        first) join each node's own: the nodes keep that metadata, the embedded text leaves it out.
        Other keyword arguments go to SentenceSplitter.
        """
        return node_parser_for(self, chunk_size, chunk_overlap, excluded_embed_metadata_keys, **kwargs)

    # ------------------------------------------------------------------ instruction-aware queries
    def resolve_instruction(self, instruction: str | None) -> str | None:
        """None means "the default query_instruction"; "" means "no instruction at all"."""
        return normalize_instruction(self.query_instruction if instruction is None else instruction)

    @dispatcher.span
    def get_query_embeddings(
        self,
        queries: Sequence[str],
        instructions: str | None | Sequence[str | None] = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[Embedding]:
        """Embed many queries, each under its own instruction, in as few forward passes as possible.

        ``instructions`` is one string (or None) for all queries, or one entry per query.
        ``llm_weight`` (a two-space model's LLM share, 0..1) holds for this call; None: each query
        string's own (an InstructedText's), else the ``llm_weight`` field, else the model's own;
        ``instruction_strength`` (an instruction-effect model's, 0..10) the same way.
        Cached embeddings are reused; the rest are encoded in one batched call per weight or strength.
        """
        queries, per_query, knobs = self._query_inputs(queries, instructions, llm_weight, instruction_strength)
        with embedding_call(self.callback_manager, self.to_payload(), queries, per_query, "query") as call:
            call.vectors = self._embedder.embed_queries(queries, per_query, knobs, self.embed_batch_size)
        return call.vectors

    @dispatcher.span
    async def aget_query_embeddings(
        self,
        queries: Sequence[str],
        instructions: str | None | Sequence[str | None] = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[Embedding]:
        queries, per_query, knobs = self._query_inputs(queries, instructions, llm_weight, instruction_strength)
        with embedding_call(self.callback_manager, self.to_payload(), queries, per_query, "query") as call:
            embed = self._embedder.embed_queries
            call.vectors = await asyncio.to_thread(embed, queries, per_query, knobs, self.embed_batch_size)
        return call.vectors

    def get_query_embedding_for(
        self,
        query: str,
        instruction: str | None = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> Embedding:
        """One query under its own instruction (None: ``query_instruction``; "": none) and, for a
        two-space model, ``llm_weight`` (None: the field's, else the model's own); for an
        instruction-effect model, ``instruction_strength`` the same way."""
        return self.get_query_embeddings([query], [instruction], llm_weight, instruction_strength)[0]

    async def aget_query_embedding_for(
        self,
        query: str,
        instruction: str | None = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> Embedding:
        return (await self.aget_query_embeddings([query], [instruction], llm_weight, instruction_strength))[0]

    def query_bundle(
        self,
        query: str,
        instruction: str | None = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> InstructionQueryBundle:
        """A QueryBundle whose embedding already reflects ``instruction`` (and ``llm_weight`` or
        ``instruction_strength``).

        Pass it to any LlamaIndex retriever or query engine (``retriever.retrieve(bundle)``,
        ``query_engine.query(bundle)``): vector retrievers use a bundle's embedding as given.
        Its ``instruction`` is the one applied ("" when none), so it embeds the same again.
        """
        applied = self.resolve_instruction(instruction) or ""
        embedding = self.get_query_embedding_for(query, applied, llm_weight, instruction_strength)
        return _embedded_bundle(query, applied, embedding, llm_weight, instruction_strength)

    async def aquery_bundle(
        self,
        query: str,
        instruction: str | None = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> InstructionQueryBundle:
        applied = self.resolve_instruction(instruction) or ""
        embedding = await self.aget_query_embedding_for(query, applied, llm_weight, instruction_strength)
        return _embedded_bundle(query, applied, embedding, llm_weight, instruction_strength)

    def _query_inputs(
        self, queries: Sequence[str], instructions: Any, llm_weight: Any, instruction_strength: Any
    ) -> tuple[list[str], list[str | None], list[QueryKnobs]]:
        """A call's queries as they enter, checked once: strings with text; one normalised instruction
        each (None: ``query_instruction``); each one's knobs (the call's, else its string's own, else
        the fields'), in range and taken by the model."""
        queries = list(queries)
        check_texts(queries, "query")
        per_query = per_item_instructions(instructions, len(queries), texts="queries", default=self.query_instruction)
        asked = QueryKnobs.checked(llm_weight, instruction_strength)
        own = QueryKnobs(self.llm_weight, self.instruction_strength)  # checked when the fields were set
        knobs = [asked.or_else(knobs_of(query)).or_else(own) for query in queries]
        for distinct in set(knobs):
            distinct.require(self.encoder)
        return queries, per_query, knobs

    # ------------------------------------------------------------------ BaseEmbedding: queries
    # LlamaIndex's query paths pass strings only; an InstructedText carries its instruction.
    @dispatcher.span
    def get_query_embedding(self, query: str) -> Embedding:
        return self.get_query_embeddings([query], [instruction_of(query)])[0]

    @dispatcher.span
    async def aget_query_embedding(self, query: str) -> Embedding:
        return (await self.aget_query_embeddings([query], [instruction_of(query)]))[0]

    def get_agg_embedding_from_queries(
        self, queries: list[str], agg_fn: Callable[..., Embedding] | None = None
    ) -> Embedding:
        """Several strings for one query (HyDE, custom_embedding_strs): one batch, then averaged
        as LlamaIndex does (``mean_agg`` unless ``agg_fn`` is given)."""
        vectors = self.get_query_embeddings(queries, [instruction_of(query) for query in queries])
        return (agg_fn or mean_agg)(vectors)

    async def aget_agg_embedding_from_queries(
        self, queries: list[str], agg_fn: Callable[..., Embedding] | None = None
    ) -> Embedding:
        vectors = await self.aget_query_embeddings(queries, [instruction_of(query) for query in queries])
        return (agg_fn or mean_agg)(vectors)

    def _get_query_embedding(self, query: str) -> Embedding:
        queries, per_query, knobs = self._query_inputs([query], [instruction_of(query)], None, None)
        return self._embedder.embed_queries(queries, per_query, knobs, self.embed_batch_size)[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    # ------------------------------------------------------------------ BaseEmbedding: documents
    @dispatcher.span
    def get_text_embedding(self, text: str) -> Embedding:
        return self.get_text_embedding_batch([text])[0]

    @dispatcher.span
    async def aget_text_embedding(self, text: str) -> Embedding:
        return (await self.aget_text_embedding_batch([text]))[0]

    @dispatcher.span
    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """Documents in slices of embed_batch_size, one reported call each (the lock is freed
        between slices, so queries from other threads are not held up by a long ingestion)."""
        vectors: list[Embedding] = []
        slices = self._document_slices(texts)
        with _progress(slices, show_progress) as progress:
            for batch in slices:
                with self._document_call(batch) as call:
                    call.vectors = self._embed_documents(batch)
                vectors += call.vectors
                progress.update(len(batch))
        return vectors

    @dispatcher.span
    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        vectors: list[Embedding] = []
        slices = self._document_slices(texts)
        with _progress(slices, show_progress) as progress:
            for batch in slices:
                with self._document_call(batch) as call:
                    call.vectors = await asyncio.to_thread(self._embed_documents, batch)
                vectors += call.vectors
                progress.update(len(batch))
        return vectors

    def _document_slices(self, texts: list[str]) -> list[list[str]]:
        """A document call as it enters, checked once (strings; one truncation warning for the
        call), in slices of embed_batch_size."""
        texts = list(texts)
        check_texts(texts, "document")
        self._embedder.warn_if_truncated(texts, [self._document_instruction] * len(texts), "document")
        size = self.embed_batch_size
        return [texts[start : start + size] for start in range(0, len(texts), size)]

    def _document_call(self, batch: list[str]):
        instructions = [self._document_instruction] * len(batch)
        return embedding_call(self.callback_manager, self.to_payload(), batch, instructions, "document")

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        check_texts(texts, "document")  # LlamaIndex's own entry (get_text_embedding_batch checks its slices)
        return self._embed_documents(texts)

    def _embed_documents(self, texts: list[str]) -> list[Embedding]:
        return self._embedder.embed_documents(texts, self._document_instruction, self.embed_batch_size)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _progress(slices: list[list[str]], show: bool):
    """The bar LlamaIndex shows for ``show_progress=True`` ("Generating embeddings"), per text."""
    from tqdm.auto import tqdm

    return tqdm(total=sum(map(len, slices)), desc="Generating embeddings", disable=not show)


def _embedded_bundle(
    query: str, instruction: str, embedding: Embedding, llm_weight: float | None, instruction_strength: float | None
) -> InstructionQueryBundle:
    return InstructionQueryBundle(
        query_str=query,
        instruction=instruction,
        embedding=embedding,
        llm_weight=llm_weight,
        instruction_strength=instruction_strength,
    )
