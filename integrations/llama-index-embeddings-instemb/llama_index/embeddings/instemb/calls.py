"""The embedding calls of InstEmbEmbedding (base.py holds its fields), and what they report.

Queries: LlamaIndex's own paths pass strings (an ``InstructedText`` carries its instruction and
knobs); ``get_query_embeddings``, ``get_query_embedding_for`` and ``query_bundle`` take them per call.
Documents: in slices of ``embed_batch_size``, under ``text_instruction``. Inputs are checked once, as
they enter (instemb_rag.queries); an async call runs the sync one in a worker thread. Every call is
reported once on both of LlamaIndex's channels, with its instructions: the dispatcher
(``InstructionEmbeddingStartEvent``: ``input_type`` and one ``instructions`` entry per text, then
``EmbeddingEndEvent``) and the callback manager (a ``CBEventType.EMBEDDING`` event, as LlamaIndex's own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import llama_index.core.instrumentation as instrument
from llama_index.core.base.embeddings.base import Embedding, mean_agg
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent

from instemb_rag.client.caches import DocumentEmbeddingCache, QueryEmbeddingCache
from instemb_rag.client.limits import chunk_settings
from instemb_rag.instructions import normalize_instruction, per_item_instructions
from instemb_rag.queries import QueryKnobs, check_texts

from .node_parser import FILE_METADATA_KEYS, InstEmbNodeParser
from .query import InstructionQueryBundle, instruction_of, knobs_of

dispatcher = instrument.get_dispatcher(__name__)


class InstructionEmbeddingStartEvent(EmbeddingStartEvent):
    """An embedding call: which side (query or document) and the instruction of each text."""

    input_type: Literal["query", "document"]
    instructions: list[str | None]

    @classmethod
    def class_name(cls) -> str:
        return "InstructionEmbeddingStartEvent"


def in_worker_thread(name: str) -> Callable[..., Any]:
    """The async twin of the sync call ``name``: it runs in a worker thread (the encoder runs one
    forward pass at a time anyway), so the event loop is never blocked."""

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self, name), *args, **kwargs)

    return call


class EmbeddingCalls:
    """InstEmbEmbedding's query and document calls (a mixin: it reads the model's fields)."""

    @property
    def query_cache(self) -> QueryEmbeddingCache:
        return self._embedder.query_cache

    @property
    def document_cache(self) -> DocumentEmbeddingCache | None:
        return self._embedder.document_cache  # over embeddings_cache (None without one)

    @property
    def document_fingerprint(self) -> str:
        """What the document cache keys on: the encoder's document side (a server's: its model card's)."""
        return self._embedder.document_fingerprint

    @property
    def document_token_limit(self) -> int:
        """Tokens of a document (its text and the metadata LlamaIndex embeds with it) the model reads."""
        return self._embedder.document_token_limit(self._document_instruction)

    @property
    def recommended_chunk_size(self) -> int:
        """The node parser's chunk size: the CLI's (256), or the document limit if that is smaller."""
        return chunk_settings(self.encoder, self._document_instruction)[0]

    def node_parser(
        self,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        excluded_embed_metadata_keys: Sequence[str] = FILE_METADATA_KEYS,
        **kwargs: Any,
    ) -> InstEmbNodeParser:
        """LlamaIndex's SentenceSplitter on the model's own tokens, sized as ``instemb-rag index`` chunks
        (instemb_rag.client.limits.chunk_settings), its nodes keeping ``excluded_embed_metadata_keys``
        out of the embedded text: pass ``transformations=[embed_model.node_parser()]``."""
        size, overlap, tokens = chunk_settings(self.encoder, self._document_instruction, chunk_size, chunk_overlap)
        return InstEmbNodeParser(
            excluded_embed_metadata_keys, chunk_size=size, chunk_overlap=overlap, tokenizer=tokens, **kwargs
        )

    # ------------------------------------------------------------------ queries
    def resolve_instruction(self, instruction: str | None) -> str | None:
        """None means the default ``query_instruction``; "" means no instruction at all."""
        return normalize_instruction(self.query_instruction if instruction is None else instruction)

    @dispatcher.span
    def get_query_embeddings(
        self,
        queries: Sequence[str],
        instructions: str | None | Sequence[str | None] = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[Embedding]:
        """Queries, each under its instruction (one for all, or one each; None: ``query_instruction``),
        in as few forward passes as the cache leaves. A knob (``llm_weight``: a two-space model's, 0..1;
        ``instruction_strength``: an instruction-effect model's, 0..10) is this call's, else the query
        string's own, else the field's, else the model's."""
        queries, per_query, knobs = self._query_inputs(queries, instructions, llm_weight, instruction_strength)
        with self._reported(queries, per_query, "query") as result:
            result.append(self._embedder.embed_queries(queries, per_query, knobs, self.embed_batch_size))
        return result[0]

    def get_query_embedding_for(self, query: str, instruction=None, llm_weight=None, instruction_strength=None):
        """One query under its instruction (None: ``query_instruction``; "": none) and knobs."""
        return self.get_query_embeddings([query], [instruction], llm_weight, instruction_strength)[0]

    def query_bundle(self, query: str, instruction=None, llm_weight=None, instruction_strength=None):
        """A QueryBundle whose embedding already reflects ``instruction`` (and knobs), for any LlamaIndex
        retriever or query engine; its ``instruction`` is the one applied ("" for none)."""
        applied = self.resolve_instruction(instruction) or ""
        embedding = self.get_query_embedding_for(query, applied, llm_weight, instruction_strength)
        knobs = {"llm_weight": llm_weight, "instruction_strength": instruction_strength}
        return InstructionQueryBundle(query, embedding=embedding, instruction=applied, **knobs)

    def _query_inputs(self, queries: Sequence[str], instructions: Any, llm_weight: Any, instruction_strength: Any):
        queries = list(queries)
        check_texts(queries, "query")
        per_query = per_item_instructions(instructions, len(queries), texts="queries", default=self.query_instruction)
        asked, own = (
            QueryKnobs.checked(llm_weight, instruction_strength),
            QueryKnobs(self.llm_weight, self.instruction_strength),
        )
        knobs = [asked.or_else(knobs_of(query)).or_else(own) for query in queries]
        for distinct in set(knobs):
            distinct.require(self.encoder)
        return queries, per_query, knobs

    @dispatcher.span
    def get_query_embedding(self, query: str) -> Embedding:  # LlamaIndex's paths: strings only
        return self.get_query_embeddings([query], [instruction_of(query)])[0]

    def get_agg_embedding_from_queries(self, queries: list[str], agg_fn: Callable[..., Embedding] | None = None):
        """Several strings for one query (HyDE, custom_embedding_strs): one batch, averaged as LlamaIndex does."""
        return (agg_fn or mean_agg)(self.get_query_embeddings(queries, [instruction_of(query) for query in queries]))

    def _get_query_embedding(self, query: str) -> Embedding:  # LlamaIndex's hook: reported by its caller
        inputs = self._query_inputs([query], [instruction_of(query)], None, None)
        return self._embedder.embed_queries(*inputs, self.embed_batch_size)[0]

    # ------------------------------------------------------------------ documents
    @dispatcher.span
    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """Documents in slices of embed_batch_size, one reported call each (the lock is freed between
        slices, so queries from other threads are not held up by a long ingestion)."""
        from tqdm.auto import tqdm  # the bar LlamaIndex shows for show_progress=True

        texts, vectors, size = list(texts), [], self.embed_batch_size
        check_texts(texts, "document")
        self._embedder.warn_if_truncated(texts, [self._document_instruction] * len(texts), "document")
        with tqdm(total=len(texts), desc="Generating embeddings", disable=not show_progress) as progress:
            for batch in (texts[start : start + size] for start in range(0, len(texts), size)):
                with self._reported(batch, [self._document_instruction] * len(batch), "document") as result:
                    result.append(self._embedder.embed_documents(batch, self._document_instruction, size))
                vectors += result[0]
                progress.update(len(batch))
        return vectors

    @dispatcher.span
    def get_text_embedding(self, text: str) -> Embedding:
        return self.get_text_embedding_batch([text])[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:  # LlamaIndex's hook: reported by its caller
        check_texts(texts, "document")
        return self._embedder.embed_documents(texts, self._document_instruction, self.embed_batch_size)

    @contextmanager
    def _reported(self, texts: Sequence[str], instructions: list[str | None], side: str) -> Iterator[list]:
        """One call on both channels: start events, the body (appends its vectors to ``result``), end events."""
        payload = {**self.to_payload(), "input_type": side, "instructions": instructions}
        dispatcher.event(InstructionEmbeddingStartEvent(model_dict=payload, input_type=side, instructions=instructions))
        result, chunks = [], [str(text) for text in texts]  # plain strings, whatever str subclass came in
        start = {EventPayload.SERIALIZED: payload, "instructions": instructions}
        with self.callback_manager.event(CBEventType.EMBEDDING, payload=start) as event:
            yield result
            event.on_end(payload={EventPayload.CHUNKS: chunks, EventPayload.EMBEDDINGS: result[0]})
        dispatcher.event(EmbeddingEndEvent(chunks=chunks, embeddings=result[0]))

    aget_query_embeddings = in_worker_thread("get_query_embeddings")
    aget_query_embedding_for = in_worker_thread("get_query_embedding_for")
    aquery_bundle = in_worker_thread("query_bundle")
    aget_query_embedding = in_worker_thread("get_query_embedding")
    aget_agg_embedding_from_queries = in_worker_thread("get_agg_embedding_from_queries")
    aget_text_embedding_batch = in_worker_thread("get_text_embedding_batch")
    aget_text_embedding = in_worker_thread("get_text_embedding")
    _aget_query_embedding = in_worker_thread("_get_query_embedding")
    _aget_text_embedding = in_worker_thread("_get_text_embedding")
    _aget_text_embeddings = in_worker_thread("_get_text_embeddings")
