"""InstEmbEmbedding: LlamaIndex's BaseEmbedding over an instemb-rag encoder (or a server's).

instemb_rag does the work (client/sources.open_encoder opens the encoder, client/embedder.Embedder
checks the inputs and embeds them through its lock and caches); this adds LlamaIndex's fields, views,
events, node parser and serialisation (``to_dict``, pickling: the same encoder)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import llama_index.core.instrumentation as instrument
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding, mean_agg
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode

from instemb_rag.client.adapters import Closes, closed_on_failure, delegated, in_worker_thread, state_without
from instemb_rag.client.embedder import Embedder
from instemb_rag.client.limits import FILE_METADATA_KEYS
from instemb_rag.client.sources import open_encoder_of_fields
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION, normalize_instruction
from instemb_rag.knobs import KNOBS
from instemb_rag.queries import QueryKnobs

from .query import InstructionQueryBundle, Knobs, instruction_of

if TYPE_CHECKING:  # torch is imported only when a local encoder is loaded
    from instemb_rag import InstEmbEncoder

dispatcher = instrument.get_dispatcher(__name__)

DEFAULT_MODEL_NAME = "instemb-default"
DOCUMENT_ADVICE = (  # the truncation warning's advice for documents (instemb_rag/client/limits.py)
    "Split documents into chunks the model reads whole: transformations=[embed_model.node_parser()] "
    "(chunks of embed_model.recommended_chunk_size tokens, at most {limit})."
)


class InstEmbNodeParser(SentenceSplitter):
    """SentenceSplitter whose nodes leave ``excluded_embed_metadata_keys`` out of the embedded text.

    LlamaIndex embeds a node's metadata before its text, and SimpleDirectoryReader's ``file_path:
    /home/...`` then starts every chunk: tokens alike across the corpus that crowd out the text, so
    that opposite instructions agree on the top hit. InstEmb (like ``instemb-rag index``) embeds the
    text; the nodes keep the metadata for filters, citations and the LLM."""

    excluded_embed_metadata_keys: list[str] = Field(
        default_factory=lambda: list(FILE_METADATA_KEYS),
        description="Metadata keys added to every node's excluded_embed_metadata_keys (kept, not embedded).",
    )

    def __init__(self, excluded_embed_metadata_keys: Sequence[str] = FILE_METADATA_KEYS, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # (SentenceSplitter takes its own fields only)
        self.excluded_embed_metadata_keys = list(excluded_embed_metadata_keys)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbNodeParser"

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        # Split nodes inherit their document's excluded keys (and are sized without those), so the
        # keys go on a copy of each document.
        return super()._parse_nodes([self._excluding(node) for node in nodes], show_progress, **kwargs)

    def _excluding(self, node: BaseNode) -> BaseNode:
        keys = list(dict.fromkeys([*node.excluded_embed_metadata_keys, *self.excluded_embed_metadata_keys]))
        return node.model_copy(update={"excluded_embed_metadata_keys": keys})


class InstructionEmbeddingStartEvent(EmbeddingStartEvent):
    """An embedding call: which side (query or document) and the instruction of each text."""

    input_type: Literal["query", "document"]
    instructions: list[str | None]

    @classmethod
    def class_name(cls) -> str:
        return "InstructionEmbeddingStartEvent"


class InstEmbEmbedding(Closes, BaseEmbedding):
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
    # The query-time knobs, described by their declarations (instemb_rag.knobs); None: the model's own.
    llm_weight: float | None = Field(default=None, frozen=True, description=KNOBS["llm_weight"].help)
    instruction_strength: float | None = Field(
        default=None, frozen=True, description=KNOBS["instruction_strength"].help
    )
    fingerprint: str | None = Field(default=None, frozen=True, description="The encoder's; another is refused.")
    query_cache_size: int = Field(default=1024, ge=0, description="Query embeddings kept (LRU); 0 disables it.")
    base_url: str | None = Field(default=None, frozen=True, description="A running `instemb-rag serve`, or None.")
    api_key: str | None = Field(default=None, exclude=True, repr=False, description="Bearer key for base_url.")
    # Documents only, keyed on the document side, text_instruction and the text (client/caches.py): a live store.
    embeddings_cache: Any = Field(default=None, exclude=True, repr=False, description="A BaseKVStore for documents.")
    timeout: float = Field(default=60.0, gt=0, description="Seconds the server may take to answer (base_url).")

    _embedder: Embedder = PrivateAttr()  # the encoder, its lock and caches, shared by the with_* views
    _owns_remote: bool = PrivateAttr(default=False)

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        device: str = "auto",
        query_instruction: str | None = DEFAULT_QUERY_INSTRUCTION,
        *,
        encoder: InstEmbEncoder | None = None,
        **fields: Any,
    ):
        """``fields``: the fields above and BaseEmbedding's; the settings and knobs are checked before
        the model loads, and set as the encoder runs them."""
        normalize_instruction(query_instruction)  # refuses a non-string, naming it
        model_path = None if model_path is None else str(model_path)
        loaded, settings, knobs, remote = open_encoder_of_fields(model_path, encoder, device, fields)
        with closed_on_failure(loaded if remote else None):  # a server's connection; a local model stays
            fields.setdefault("model_name", loaded.model_id if remote else model_path or DEFAULT_MODEL_NAME)
            fields.update(settings, fingerprint=loaded.fingerprint, **knobs)
            super().__init__(model_path=model_path, device=device, query_instruction=query_instruction, **fields)
            document_options = {"document_advice": DOCUMENT_ADVICE, "document_instruction": self.text_instruction}
            self._embedder = Embedder(loaded, self.query_cache_size, self.embeddings_cache, remote, **document_options)
        self._owns_remote = remote

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

    def with_instruction(self, instruction: str | None) -> InstEmbEmbedding:
        """This embedding with another ``query_instruction`` ("" or None: none), sharing the encoder,
        its lock and caches (pass it as ``index.as_retriever(embed_model=...)``); close the original."""
        normalize_instruction(instruction)
        return self._view(query_instruction=instruction)

    def with_llm_weight(self, llm_weight: float | None) -> InstEmbEmbedding:
        """A view whose queries take this knob (None: the model's own), sharing the encoder."""
        return self._view_with_knob("llm_weight", llm_weight)

    def with_instruction_strength(self, instruction_strength: float | None) -> InstEmbEmbedding:
        """A view whose queries take this knob (None: the model's own), sharing the encoder."""
        return self._view_with_knob("instruction_strength", instruction_strength)

    def _view_with_knob(self, name: str, value: float | None) -> InstEmbEmbedding:
        return self._view(**{name: QueryKnobs.checked({name: value}).require(self.encoder).get(name)})

    def _view(self, **update: Any) -> InstEmbEmbedding:
        view = self.model_copy(update=update)
        view._owns_remote = False
        return view

    encoder = delegated("_embedder", "encoder", "The local encoder, or with base_url the RemoteEncoder (same API).")

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

    query_cache = delegated("_embedder", "query_cache", "The query embeddings' LRU (QueryEmbeddingCache).")
    document_cache = delegated("_embedder", "document_cache", "Over embeddings_cache (None without one).")
    document_fingerprint = delegated("_embedder", "document_fingerprint", documented_by=Embedder)
    document_token_limit = delegated("_embedder", "document_token_limit", documented_by=Embedder)

    @property
    def recommended_chunk_size(self) -> int:
        """The node parser's chunk size: the CLI's (256), or the document limit if that is smaller."""
        return self._embedder.chunk_settings()[0]

    def node_parser(
        self,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        excluded_embed_metadata_keys: Sequence[str] = FILE_METADATA_KEYS,
        **kwargs: Any,
    ) -> InstEmbNodeParser:
        """The SentenceSplitter to ingest with (``transformations=[embed_model.node_parser()]``): chunks
        the model reads whole, counted in its own tokens, sized as ``instemb-rag index`` sizes them."""
        size, overlap, tokens = self._embedder.chunk_settings(chunk_size, chunk_overlap)
        return InstEmbNodeParser(
            excluded_embed_metadata_keys, chunk_size=size, chunk_overlap=overlap, tokenizer=tokens, **kwargs
        )

    def resolve_instruction(self, instruction: str | None) -> str | None:
        """None means the default ``query_instruction``; "" means no instruction at all."""
        return normalize_instruction(self.query_instruction if instruction is None else instruction)

    @dispatcher.span
    def get_query_embeddings(
        self, queries: Sequence[str], instructions: Any = None, knobs: Knobs = None, **named_knobs: float | None
    ) -> list[Embedding]:
        """Queries, each under its instruction (one for all, or one each; None: ``query_instruction``),
        in as few forward passes as the cache leaves. A query-time knob (``knobs``, or by name) is this
        call's, else the query string's own, else the field's, else the model's."""
        queries, per_query, knobs = self._query_inputs(queries, instructions, {**(knobs or {}), **named_knobs})
        embed = partial(self._embedder.embed_queries, queries, per_query, knobs, self.embed_batch_size)
        return self._reported("query", queries, per_query, embed)

    def get_query_embedding_for(
        self, query: str, instruction: str | None = None, knobs: Knobs = None, **named_knobs: float | None
    ) -> Embedding:
        """One query under its instruction (None: ``query_instruction``; "": none) and knobs."""
        return self.get_query_embeddings([query], [instruction], knobs, **named_knobs)[0]

    def query_bundle(
        self, query: str, instruction: str | None = None, knobs: Knobs = None, **named_knobs: float | None
    ) -> InstructionQueryBundle:
        """A QueryBundle whose embedding already reflects ``instruction`` (and knobs), for any LlamaIndex
        retriever or query engine; its ``instruction`` is the one applied ("" for none)."""
        applied = self.resolve_instruction(instruction) or ""
        asked = QueryKnobs.checked({**(knobs or {}), **named_knobs})
        embedding = self.get_query_embedding_for(query, applied, asked)
        return InstructionQueryBundle(query, embedding=embedding, instruction=applied, **asked)

    def _query_inputs(self, queries: Sequence[str], instructions: Any, knobs: Knobs) -> tuple:
        own = {name: getattr(self, name) for name in KNOBS}  # checked when the fields were set
        return self._embedder.layered_query_inputs(queries, instructions, self.query_instruction, own, knobs)

    @dispatcher.span
    def get_query_embedding(self, query: str) -> Embedding:  # LlamaIndex's paths: strings only
        return self.get_query_embeddings([query], [instruction_of(query)])[0]

    def get_agg_embedding_from_queries(self, queries: list[str], agg_fn: Callable | None = None) -> Embedding:
        """Several strings for one query (HyDE, custom_embedding_strs): one batch, averaged as LlamaIndex does."""
        return (agg_fn or mean_agg)(self.get_query_embeddings(queries, [instruction_of(query) for query in queries]))

    def _get_query_embedding(self, query: str) -> Embedding:  # LlamaIndex's hook: reported by its caller
        inputs = self._query_inputs([query], [instruction_of(query)], None)
        return self._embedder.embed_queries(*inputs, self.embed_batch_size)[0]

    @dispatcher.span
    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """Documents in slices of embed_batch_size, one reported call each (the lock is freed between
        slices, so queries from other threads are not held up by a long ingestion)."""
        from tqdm.auto import tqdm  # the bar LlamaIndex shows for show_progress=True

        texts, vectors = self._embedder.document_inputs(texts), []
        with tqdm(total=len(texts), desc="Generating embeddings", disable=not show_progress) as progress:
            for batch, instructions, embed in self._embedder.document_slices(texts, self.embed_batch_size):
                vectors += self._reported("document", batch, instructions, embed)
                progress.update(len(batch))
        return vectors

    @dispatcher.span
    def get_text_embedding(self, text: str) -> Embedding:
        return self.get_text_embedding_batch([text])[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:  # LlamaIndex's hook: reported by its caller
        return self._embedder.embed_documents(self._embedder.document_inputs(texts), self.embed_batch_size)

    def _reported(
        self, side: str, texts: Sequence[str], instructions: list[str | None], embed: Callable[[], list[Embedding]]
    ) -> list[Embedding]:
        """One call on both channels (the dispatcher's events, the callback manager's): ``embed()`` between."""
        payload = {**self.to_payload(), "input_type": side, "instructions": instructions}
        dispatcher.event(InstructionEmbeddingStartEvent(model_dict=payload, input_type=side, instructions=instructions))
        chunks = [str(text) for text in texts]  # plain strings, whatever str subclass came in
        start = {EventPayload.SERIALIZED: payload, "instructions": instructions}
        with self.callback_manager.event(CBEventType.EMBEDDING, payload=start) as event:
            vectors = embed()
            event.on_end(payload={EventPayload.CHUNKS: chunks, EventPayload.EMBEDDINGS: vectors})
        dispatcher.event(EmbeddingEndEvent(chunks=chunks, embeddings=vectors))
        return vectors

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
        names = ("fingerprint", "query_instruction", "text_instruction", *KNOBS)
        return {**super().to_payload(), **{name: getattr(self, name) for name in names}}

    def __getstate__(self) -> dict[str, Any]:
        # Unpickling rebuilds the encoder, its lock and caches from the fields (checking the
        # fingerprint); the callback manager's handlers and the embeddings_cache are this process's.
        return state_without(BaseModel.__getstate__(self), ("callback_manager", "embeddings_cache"))

    def __setstate__(self, state: dict[str, Any]) -> None:
        # LlamaIndex's __setstate__ swallows a failed __init__; a wrong model must fail loudly.
        self.__init__(**state["__dict__"])
