"""InstEmbEmbedding: LlamaIndex's BaseEmbedding over an instemb-rag encoder (or a server's).

The work is instemb_rag's: ``open_encoder`` (client/sources.py) loads the model, takes one loaded, or
reaches ``instemb-rag serve`` (``base_url``: no torch here); an ``Embedder`` (client/embedder.py) holds
it with its lock, caches and truncation warning; inputs are checked as they enter (queries.py). This
class adds LlamaIndex's fields, views, calls and serialisation (``to_dict``, pickling: the same
encoder). A query is read under ``query_instruction``, an ``InstructedText``'s own or a call's; every
call is reported once, with its instructions, to the dispatcher and the callback manager.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import llama_index.core.instrumentation as instrument
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding, mean_agg
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent

from instemb_rag.client.caches import DocumentEmbeddingCache, QueryEmbeddingCache
from instemb_rag.client.embedder import Embedder
from instemb_rag.client.limits import chunk_settings
from instemb_rag.client.sources import open_encoder
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION, normalize_instruction, per_item_instructions
from instemb_rag.knobs import KNOBS
from instemb_rag.queries import QueryKnobs, check_texts

from .node_parser import FILE_METADATA_KEYS, InstEmbNodeParser
from .query import InstructionQueryBundle, instruction_of, knobs_of

if TYPE_CHECKING:  # torch is imported only when a local encoder is loaded
    from instemb_rag import InstEmbEncoder

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


DEFAULT_MODEL_NAME = "instemb-default"
DOCUMENT_ADVICE = (  # the truncation warning's advice for documents (instemb_rag/client/limits.py)
    "Split documents into chunks the model reads whole: transformations=[embed_model.node_parser()] "
    "(chunks of embed_model.recommended_chunk_size tokens, at most {limit})."
)


class InstEmbEmbedding(BaseEmbedding):
    """InstEmb embeddings for LlamaIndex: one instruction per query, documents without one.

    The model is ``model_path`` (None: the default), an ``encoder`` already loaded (``from_encoder``),
    or a running server's (``base_url``; ``api_key`` defaults to INSTEMB_API_KEY). Each field's
    description says the rest; ``embeddings_cache`` (a LlamaIndex ``BaseKVStore``) caches documents.
    """

    model_path: str | None = Field(default=None, frozen=True, description="Model folder; None: the default model.")
    device: str = Field(default="auto", frozen=True, description="Torch device, or 'auto'.")
    query_instruction: str | None = Field(
        default=DEFAULT_QUERY_INSTRUCTION, frozen=True, description="For queries asked without one ('' or None: none)."
    )
    text_instruction: str | None = Field(default=None, frozen=True, description="For documents (normally None).")
    pooling: str | None = Field(default=None, frozen=True, description="Pooling mode; None: the model's.")
    lookahead_length: int | None = Field(default=None, ge=0, frozen=True, description="None: the model's.")
    max_length: int | None = Field(default=None, ge=8, frozen=True, description="Tokens per input; None: the model's.")
    precision: str | None = Field(default=None, frozen=True, description="fp32 (None) or int8 (CPU only).")
    # The query-time knobs (instemb_rag.knobs), their help from the declarations; None: the model's own.
    llm_weight: float | None = Field(
        default=None, frozen=True, description=f"{KNOBS['llm_weight'].help}; None: its own."
    )
    instruction_strength: float | None = Field(
        default=None, frozen=True, description=f"{KNOBS['instruction_strength'].help}; None: its own."
    )
    fingerprint: str | None = Field(default=None, frozen=True, description="The encoder's; another is refused.")
    query_cache_size: int = Field(default=1024, ge=0, description="Query embeddings kept (LRU); 0 disables it.")
    base_url: str | None = Field(default=None, frozen=True, description="A running `instemb-rag serve`, or None.")
    api_key: str | None = Field(default=None, exclude=True, repr=False, description="Bearer key for base_url.")
    # Documents only, keyed on the document side, text_instruction and the text (client/caches.py): a live store.
    embeddings_cache: Any = Field(default=None, exclude=True, repr=False, description="A BaseKVStore for documents.")
    timeout: float = Field(default=60.0, gt=0, description="Seconds the server may take to answer (base_url).")

    _embedder: Embedder = PrivateAttr()  # the encoder, its lock and caches, shared by the with_* views
    _document_instruction: str | None = PrivateAttr(default=None)
    _owns_remote: bool = PrivateAttr(default=False)

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        device: str = "auto",
        query_instruction: str | None = DEFAULT_QUERY_INSTRUCTION,
        text_instruction: str | None = None,
        embed_batch_size: int = 16,
        query_cache_size: int = 1024,
        encoder: InstEmbEncoder | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        pooling: str | None = None,
        lookahead_length: int | None = None,
        max_length: int | None = None,
        precision: str | None = None,
        fingerprint: str | None = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
        **kwargs: Any,
    ):
        model_path = None if model_path is None else str(model_path)
        normalize_instruction(query_instruction)  # refuses a non-string, naming it
        fields = {name: value for name, value in locals().items() if name in InstEmbEmbedding.model_fields}
        knobs = QueryKnobs.checked(llm_weight, instruction_strength)  # in range, before any model loads
        asked = {"pooling": pooling, "lookahead_length": lookahead_length, "max_length": max_length}
        loaded, settings = open_encoder(
            model_path, encoder, base_url, api_key, timeout, device, fingerprint, precision=precision, **asked
        )
        remote = base_url is not None
        try:
            embedder = Embedder(loaded, query_cache_size, kwargs.get("embeddings_cache"), remote, DOCUMENT_ADVICE)
            document_instruction = normalize_instruction(text_instruction)
            if not remote:  # (a server's model refuses one itself: 400)
                loaded.document_side.refuse_instruction(document_instruction)
            kwargs.setdefault("model_name", loaded.model_id if remote else model_path or DEFAULT_MODEL_NAME)
            fields.update(settings, fingerprint=loaded.fingerprint, **knobs.require(loaded))
            super().__init__(**fields, **kwargs)  # the settings and the fingerprint as the encoder runs them
        except BaseException:
            if remote:
                loaded.close()
            raise
        self._embedder, self._document_instruction, self._owns_remote = embedder, document_instruction, remote

    @classmethod
    def from_encoder(
        cls, encoder: InstEmbEncoder, model_path: str | os.PathLike | None = None, **kwargs: Any
    ) -> InstEmbEmbedding:
        """Wrap an encoder already loaded (e.g. shared with an indexer); ``model_path`` is where it
        loads again (None: the default model), for to_dict/from_dict and pickling."""
        kwargs.setdefault("model_name", str(model_path or f"{type(encoder).__name__} {encoder.fingerprint[:12]}"))
        return cls(model_path, encoder=encoder, device=str(encoder.device), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbEmbedding"

    # ------------------------------------------------------------------ views (sharing the encoder)
    def with_instruction(self, instruction: str | None) -> InstEmbEmbedding:
        """This embedding with another ``query_instruction`` ("" or None: none), sharing the encoder,
        its lock and caches (pass it as ``index.as_retriever(embed_model=...)``); close the original."""
        normalize_instruction(instruction)
        return self._view(query_instruction=instruction)

    def with_llm_weight(self, llm_weight: float | None) -> InstEmbEmbedding:
        """A view whose queries are weighed with ``llm_weight`` (a two-space model's; instemb_rag.knobs)."""
        return self._view(llm_weight=QueryKnobs.checked(llm_weight).require(self.encoder).llm_weight)

    def with_instruction_strength(self, instruction_strength: float | None) -> InstEmbEmbedding:
        """A view whose queries are read at ``instruction_strength`` (an instruction-effect model's; instemb_rag.knobs)."""
        knobs = QueryKnobs.checked(instruction_strength=instruction_strength).require(self.encoder)
        return self._view(instruction_strength=knobs.instruction_strength)

    def _view(self, **update: Any) -> InstEmbEmbedding:
        view = self.model_copy(update=update)
        view._owns_remote = False
        return view

    # ------------------------------------------------------------------ identity and lifetime
    @property
    def encoder(self) -> Any:
        """The local encoder, or with base_url the RemoteEncoder (the same encode_* API)."""
        return self._embedder.encoder

    @property
    def is_remote(self) -> bool:
        return self.base_url is not None

    @property
    def dimension(self) -> int:
        return self.encoder.dimension

    def close(self) -> None:
        """Close the connection to the server this embedding opened (base_url); a local model stays."""
        if self._owns_remote:
            self.encoder.close()

    def __enter__(self) -> InstEmbEmbedding:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ caches and chunking
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
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> list[Embedding]:
        """Queries, each under its instruction (one for all, or one each; None: ``query_instruction``),
        in as few forward passes as the cache leaves. A query-time knob (``knobs``, name -> value, or
        by name; instemb_rag.knobs) is this call's, else the query string's own, else the field's,
        else the model's."""
        queries, per_query, knobs = self._query_inputs(queries, instructions, {**(knobs or {}), **named_knobs})
        with self._reported(queries, per_query, "query") as result:
            result.append(self._embedder.embed_queries(queries, per_query, knobs, self.embed_batch_size))
        return result[0]

    def get_query_embedding_for(
        self,
        query: str,
        instruction: str | None = None,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> Embedding:
        """One query under its instruction (None: ``query_instruction``; "": none) and knobs."""
        return self.get_query_embeddings([query], [instruction], knobs, **named_knobs)[0]

    def query_bundle(
        self,
        query: str,
        instruction: str | None = None,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> InstructionQueryBundle:
        """A QueryBundle whose embedding already reflects ``instruction`` (and knobs), for any LlamaIndex
        retriever or query engine; its ``instruction`` is the one applied ("" for none)."""
        applied = self.resolve_instruction(instruction) or ""
        asked = QueryKnobs.checked({**(knobs or {}), **named_knobs})
        embedding = self.get_query_embedding_for(query, applied, asked)
        return InstructionQueryBundle(query, embedding=embedding, instruction=applied, **asked)

    def _query_inputs(self, queries: Sequence[str], instructions: Any, knobs: Mapping[str, Any]):
        queries = list(queries)
        check_texts(queries, "query")
        per_query = per_item_instructions(instructions, len(queries), texts="queries", default=self.query_instruction)
        asked = QueryKnobs.checked(knobs)
        own = QueryKnobs(**{name: getattr(self, name) for name in KNOBS})  # checked when the fields were set
        knobs = [asked.or_else(knobs_of(query)).or_else(own) for query in queries]
        for distinct in set(knobs):
            distinct.require(self.encoder)
        return queries, per_query, knobs

    @dispatcher.span
    def get_query_embedding(self, query: str) -> Embedding:  # LlamaIndex's paths: strings only
        return self.get_query_embeddings([query], [instruction_of(query)])[0]

    def get_agg_embedding_from_queries(self, queries: list[str], agg_fn: Callable | None = None) -> Embedding:
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

    def to_payload(self) -> dict[str, Any]:
        names = ("fingerprint", "query_instruction", "text_instruction", "llm_weight", "instruction_strength")
        return {**super().to_payload(), **{name: getattr(self, name) for name in names}}

    def __getstate__(self) -> dict[str, Any]:
        # Unpickling rebuilds the encoder, its lock and caches from the fields (checking the
        # fingerprint); the callback manager's handlers and the embeddings_cache are this process's.
        state = BaseModel.__getstate__(self)
        state["__pydantic_private__"] = None
        skipped = ("callback_manager", "embeddings_cache")
        state["__dict__"] = {key: value for key, value in state["__dict__"].items() if key not in skipped}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # LlamaIndex's __setstate__ swallows a failed __init__; a wrong model must fail loudly.
        self.__init__(**state["__dict__"])
