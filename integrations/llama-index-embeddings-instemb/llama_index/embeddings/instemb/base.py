"""InstEmbEmbedding: LlamaIndex's BaseEmbedding over an InstEmbEncoder.

LlamaIndex asks an embedding model for a query embedding with the query string alone.
InstEmb embeds a query *together with an instruction*, so this class

* uses ``query_instruction`` for LlamaIndex's ordinary query paths (query engines,
  ``index.as_retriever()``); by default that is instemb_rag's ``DEFAULT_QUERY_INSTRUCTION``
  (none), as for ``instemb-rag query`` and the server;
* embeds a query string that carries its own instruction (``InstructedText``, what an
  ``InstructionQueryBundle`` hands a retriever) under that instruction;
* offers ``get_query_embedding_for(query, instruction)`` / ``query_bundle(query, instruction)``
  and ``with_instruction(instruction)``: a view with another default instruction that shares
  the loaded encoder, for ``index.as_retriever(embed_model=...)`` and query engines;
* over a two-space model, takes ``llm_weight`` (the LLM space's share of a query's score, 0..1;
  weights.py) as a field, per call, or per query string, and ``with_llm_weight(w)``: documents
  are stored with both halves, so a weight never re-embeds them;
* over an instruction-effect model, takes ``instruction_strength`` (how much the instruction moves
  a query's ranking, 0..10; 0: plain search) the same ways, and ``with_instruction_strength(s)``.

Documents (``text`` in LlamaIndex's words) are embedded under ``text_instruction`` (normally
None), through the encoder's document method (queries through its query method); their limits,
tokenizer and fingerprint are the encoder's ``document_side`` (instemb_rag/encoder/sides.py). Every call,
query or document, is reported to LlamaIndex's dispatcher and callback manager with its
instructions (events.py). Text longer than the model reads gives a TruncationWarning (limits.py);
``node_parser()`` splits documents into nodes it reads whole (node_parser.py); an
``embeddings_cache`` (a LlamaIndex KV store) keeps document embeddings (cache.py).

The fields say which model this is (``model_path``, the encoder settings, and ``fingerprint``),
so ``to_dict``/``from_dict`` and pickling rebuild the same encoder, and refuse a model whose
fingerprint differs. With ``base_url`` the embeddings come from a running ``instemb-rag serve``
(RemoteEncoder in remote.py) and neither torch nor the model is loaded in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Sequence

import llama_index.core.instrumentation as instrument
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding, mean_agg
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr, field_validator

from instemb_rag.instructions import (  # torch-free
    DEFAULT_QUERY_INSTRUCTION,
    normalize_instruction,
    per_item_instructions,
)

from .cache import DocumentEmbeddingCache, QueryEmbeddingCache, QueryKey
from .events import InputType, embedding_call
from .inputs import check_texts
from .limits import can_count, require_local, warn_if_truncated
from .limits import document_token_limit as document_side_token_limit
from .loading import check_fingerprint, load_encoder
from .node_parser import FILE_METADATA_KEYS, InstEmbNodeParser, node_parser_for
from .query import InstructionQueryBundle, instruction_of, instruction_strength_of, llm_weight_of
from .weights import (
    check_instruction_strength,
    check_llm_weight,
    query_knobs,
    require_instruction_strength,
    require_llm_weight,
)

if TYPE_CHECKING:  # torch is imported only when a local encoder is loaded
    from instemb_rag import InstEmbEncoder

    from .remote import RemoteEncoder

DEFAULT_MODEL_NAME = "instemb-default"

dispatcher = instrument.get_dispatcher(__name__)


class InstEmbEmbedding(BaseEmbedding):
    """InstEmb embeddings for LlamaIndex: one instruction per query, documents without one.

    Args:
        model_path: an InstEmb checkpoint folder, a Hugging Face decoder folder, or None for
            the default model shipped with instemb-rag.
        device: "auto" (CUDA when present), "cpu", "cuda", "cuda:1", ...
        query_instruction: used when LlamaIndex asks for a query embedding without an
            instruction (e.g. inside a query engine). "" or None means no instruction; the
            default is instemb_rag's DEFAULT_QUERY_INSTRUCTION (none), as in the CLI and server.
        text_instruction: instruction for document embeddings; None (the default) means none. An
            encoder whose documents a sentence encoder embeds (two-tower, two spaces; its
            ``document_side`` reads no instruction) refuses one.
        llm_weight: a two-space model's LLM share of a query's score, 0..1 (None: the model's
            own); per call ``get_query_embeddings(..., llm_weight=...)``, or ``with_llm_weight``.
            An encoder of one space refuses one.
        instruction_strength: an instruction-effect model's strength, how much the instruction moves
            a query's ranking, 0..10 (0: plain search; None: the model's own); per call
            ``get_query_embeddings(..., instruction_strength=...)``, or ``with_instruction_strength``.
            A model without the knob refuses one.
        pooling, lookahead_length, max_length, precision: the encoder's settings (None: the
            checkpoint's own); after loading, the fields hold what the encoder uses.
        fingerprint: the encoder this embedding must be (set by to_dict); a model whose
            fingerprint differs is refused.
        query_cache_size: how many query embeddings to keep (LRU keyed on encoder
            fingerprint, instruction and text); 0 turns the cache off.
        embeddings_cache: a LlamaIndex ``BaseKVStore`` (e.g. ``SimpleKVStore``, persisted with
            ``persist(path)``) for document embeddings, keyed on the fingerprint of the encoder's
            document side, ``text_instruction`` and the text: re-ingesting unchanged
            nodes embeds nothing. Not saved by to_dict or pickling (pass it again).
        encoder: an already-loaded InstEmbEncoder to use instead of loading ``model_path``
            (``model_path`` then says where it can be loaded again, for to_dict and pickling).
        base_url: URL of a running ``instemb-rag serve`` (e.g. "http://127.0.0.1:8000"): embed
            through its /v1/embeddings instead of loading a model here (no torch import).
        api_key: the server's key (Bearer); default: the INSTEMB_API_KEY environment variable.
        timeout: seconds the server may take to answer (base_url only).
    """

    model_path: str | None = Field(
        default=None, frozen=True, description="Checkpoint or model folder; None means the default model."
    )
    device: str = Field(default="auto", frozen=True, description="Torch device, or 'auto'.")
    query_instruction: str | None = Field(
        default=DEFAULT_QUERY_INSTRUCTION,
        frozen=True,
        description="Instruction for query embeddings requested without one (with_instruction gives another).",
    )
    text_instruction: str | None = Field(
        default=None, frozen=True, description="Instruction for document embeddings (normally None)."
    )
    pooling: str | None = Field(default=None, frozen=True, description="Pooling mode; None: the checkpoint's.")
    lookahead_length: int | None = Field(
        default=None, ge=0, frozen=True, description="Look-ahead tokens at inference; None: the checkpoint's."
    )
    max_length: int | None = Field(
        default=None, ge=8, frozen=True, description="Tokens per input; None: the checkpoint's."
    )
    precision: str | None = Field(default=None, frozen=True, description="fp32 (None) or int8 (CPU only).")
    llm_weight: float | None = Field(
        default=None,
        frozen=True,
        description="A two-space model's LLM share of a query's score, 0..1; None: the model's own.",
    )
    instruction_strength: float | None = Field(
        default=None,
        frozen=True,
        description="An instruction-effect model's strength (how much the instruction moves a query), 0..10; "
        "None: the model's own.",
    )
    fingerprint: str | None = Field(
        default=None, frozen=True, description="The encoder's fingerprint; a model that differs is refused."
    )
    query_cache_size: int = Field(
        default=1024, ge=0, description="Query embeddings kept in the LRU cache; 0 disables it."
    )
    base_url: str | None = Field(
        default=None, frozen=True, description="URL of a running `instemb-rag serve`; None loads the model locally."
    )
    api_key: str | None = Field(default=None, exclude=True, repr=False, description="Bearer key for base_url.")
    # LlamaIndex's field, used for documents only and keyed on more than the text (cache.py). A
    # live store (a file's contents, a Redis connection), so neither to_dict nor pickling carries it.
    embeddings_cache: Any = Field(
        default=None,
        exclude=True,
        repr=False,
        description="A LlamaIndex BaseKVStore for document embeddings (keyed on encoder, instruction and text).",
    )
    timeout: float = Field(default=60.0, gt=0, description="Seconds the server may take to answer (base_url).")

    _encoder: InstEmbEncoder | RemoteEncoder = PrivateAttr()
    _query_cache: QueryEmbeddingCache = PrivateAttr()
    _document_cache: DocumentEmbeddingCache | None = PrivateAttr(default=None)
    # One forward pass at a time: the async methods run the encoder in worker threads.
    _model_lock: Any = PrivateAttr()
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
        llm_weight = check_llm_weight(llm_weight)  # before any model loads
        instruction_strength = check_instruction_strength(instruction_strength)
        asked = {"pooling": pooling, "lookahead_length": lookahead_length, "max_length": max_length}
        loaded, settings = load_encoder(
            model_path, encoder, base_url, api_key, timeout, device, precision=precision, **asked
        )
        if base_url is not None:
            kwargs.setdefault("model_name", loaded.model_id)
        try:
            check_fingerprint(fingerprint, loaded.fingerprint, model_path, base_url)
            if can_count(loaded):  # (a server's model refuses one itself: 400)
                loaded.document_side.refuse_instruction(normalize_instruction(text_instruction))
            require_llm_weight(loaded, llm_weight)
            require_instruction_strength(loaded, instruction_strength)
            kwargs.setdefault("model_name", model_path or DEFAULT_MODEL_NAME)
            super().__init__(
                model_path=model_path,
                device=device,
                query_instruction=query_instruction,
                text_instruction=text_instruction,
                embed_batch_size=embed_batch_size,
                query_cache_size=query_cache_size,
                base_url=base_url,
                api_key=api_key,
                timeout=timeout,
                fingerprint=loaded.fingerprint,
                llm_weight=llm_weight,
                instruction_strength=instruction_strength,
                **settings,
                **kwargs,
            )
        except BaseException:
            if base_url is not None:
                loaded.close()
            raise
        self._encoder = loaded
        self._owns_remote = base_url is not None
        self._query_cache = QueryEmbeddingCache(query_cache_size)
        self._document_cache = None if self.embeddings_cache is None else DocumentEmbeddingCache(self.embeddings_cache)
        # Local: one forward pass at a time. Remote: the server batches concurrent requests itself.
        self._model_lock = contextlib.nullcontext() if base_url is not None else threading.Lock()

    @field_validator("query_instruction", "text_instruction")
    @classmethod
    def _instruction_is_text(cls, value: Any) -> str | None:
        normalize_instruction(value)  # refuses a non-string, naming it
        return value

    @classmethod
    def from_encoder(
        cls, encoder: InstEmbEncoder, model_path: str | os.PathLike | None = None, **kwargs: Any
    ) -> InstEmbEmbedding:
        """Wrap an encoder that is already loaded (e.g. shared with an indexer).

        ``model_path`` is where the same encoder can be loaded again (None: the default model);
        to_dict/from_dict and pickling use it, and refuse a model whose fingerprint differs.
        """
        config = getattr(encoder, "config", None)  # an encoder of parts has none: its label names it
        kwargs.setdefault("model_name", str(config.base_model) if config is not None else encoder.label)
        return cls(model_path, encoder=encoder, device=str(encoder.device), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbEmbedding"

    def with_instruction(self, instruction: str | None) -> InstEmbEmbedding:
        """A view of this embedding whose query_instruction is ``instruction`` ("" or None: none).

        It shares the loaded encoder, its lock and the query cache (keyed on the instruction),
        so it costs nothing; pass it as ``index.as_retriever(embed_model=...)`` or
        ``index.as_query_engine(embed_model=...)``. Closing it closes nothing; close the original.
        """
        normalize_instruction(instruction)
        view = self.model_copy(update={"query_instruction": instruction})
        view._owns_remote = False
        return view

    def with_llm_weight(self, llm_weight: float | None) -> InstEmbEmbedding:
        """A view of this embedding whose queries are weighed with ``llm_weight`` (a two-space
        model's LLM share, 0..1; None: the model's own), sharing the encoder, its lock and the query
        cache (keyed on the weight), as ``with_instruction``. An encoder of one space refuses one."""
        view = self.model_copy(update={"llm_weight": require_llm_weight(self._encoder, llm_weight)})
        view._owns_remote = False
        return view

    def with_instruction_strength(self, instruction_strength: float | None) -> InstEmbEmbedding:
        """A view of this embedding whose queries are read at ``instruction_strength`` (an
        instruction-effect model's, 0..10; None: the model's own), as ``with_llm_weight``."""
        strength = require_instruction_strength(self._encoder, instruction_strength)
        view = self.model_copy(update={"instruction_strength": strength})
        view._owns_remote = False
        return view

    # ------------------------------------------------------------------ identity and lifetime
    @property
    def encoder(self) -> InstEmbEncoder | RemoteEncoder:
        """The local InstEmbEncoder, or with base_url the RemoteEncoder (same encode_* API)."""
        return self._encoder

    @property
    def is_remote(self) -> bool:
        return self.base_url is not None

    @property
    def dimension(self) -> int:
        return self._encoder.dimension

    @property
    def query_cache(self) -> QueryEmbeddingCache:
        return self._query_cache

    @property
    def document_cache(self) -> DocumentEmbeddingCache | None:
        """The document-embedding cache over ``embeddings_cache`` (None without one)."""
        return self._document_cache

    @property
    def document_fingerprint(self) -> str:
        """The fingerprint of the encoder's document side, which the document cache keys on: another
        query side over the same documents (a two-tower or two-space model) reuses their vectors. A
        server's is the one its model card reports."""
        if can_count(self._encoder):
            return self._encoder.document_side.fingerprint
        return self._encoder.document_fingerprint

    # ------------------------------------------------------------------ chunking
    @property
    def document_token_limit(self) -> int:
        """Tokens of a document (node text plus the metadata LlamaIndex embeds with it) the model
        reads; the rest is cut (with a TruncationWarning): the encoder's ``document_side.token_limit``
        (its most restrictive part's, in that part's tokens), less a document instruction's tokens."""
        require_local(self._encoder, "document_token_limit")
        return document_side_token_limit(self._encoder, normalize_instruction(self.text_instruction))

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

    def close(self) -> None:
        """Close the connection to the server this embedding opened (base_url); a local model stays."""
        if self._owns_remote:
            self._encoder.close()

    def __enter__(self) -> InstEmbEmbedding:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def to_payload(self) -> dict[str, Any]:
        payload = super().to_payload()
        payload.update(
            fingerprint=self.fingerprint,
            query_instruction=self.query_instruction,
            text_instruction=self.text_instruction,
            llm_weight=self.llm_weight,
            instruction_strength=self.instruction_strength,
        )
        return payload

    def __getstate__(self) -> dict[str, Any]:
        # The encoder, its lock and the cache are rebuilt from the fields on unpickling (the
        # fingerprint is checked), so none of them is pickled; LlamaIndex's own __getstate__
        # would try each one and log a warning for the lock and the client.
        # The callback manager's handlers belong to this process (the unpickled embedding reports
        # to its own process's, e.g. Settings.callback_manager).
        state = BaseModel.__getstate__(self)
        state["__pydantic_private__"] = None
        # So is the embeddings_cache's store (a live object, e.g. a Redis connection): pass it again.
        state["__dict__"] = {
            key: value
            for key, value in state["__dict__"].items()
            if key not in ("callback_manager", "embeddings_cache")
        }
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # LlamaIndex's __setstate__ swallows a failed __init__; a wrong model must fail loudly.
        self.__init__(**state["__dict__"])

    # ------------------------------------------------------------------ instruction-aware queries
    def resolve_instruction(self, instruction: str | None) -> str | None:
        """None means "the default query_instruction"; "" means "no instruction at all"."""
        chosen = self.query_instruction if instruction is None else instruction
        return normalize_instruction(chosen)

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
        queries = list(queries)
        check_texts(queries, "query")
        per_query = self._per_query_instructions(queries, instructions)
        knobs = self._per_query_knobs(queries, llm_weight, instruction_strength)
        with embedding_call(self.callback_manager, self.to_payload(), queries, per_query, "query") as call:
            call.vectors = self._embed_queries(queries, per_query, knobs)
        return call.vectors

    @dispatcher.span
    async def aget_query_embeddings(
        self,
        queries: Sequence[str],
        instructions: str | None | Sequence[str | None] = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[Embedding]:
        queries = list(queries)
        check_texts(queries, "query")
        per_query = self._per_query_instructions(queries, instructions)
        knobs = self._per_query_knobs(queries, llm_weight, instruction_strength)
        with embedding_call(self.callback_manager, self.to_payload(), queries, per_query, "query") as call:
            call.vectors = await asyncio.to_thread(self._embed_queries, queries, per_query, knobs)
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
        return InstructionQueryBundle(
            query_str=query,
            instruction=applied,
            embedding=embedding,
            llm_weight=llm_weight,
            instruction_strength=instruction_strength,
        )

    async def aquery_bundle(
        self,
        query: str,
        instruction: str | None = None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> InstructionQueryBundle:
        applied = self.resolve_instruction(instruction) or ""
        embedding = await self.aget_query_embedding_for(query, applied, llm_weight, instruction_strength)
        return InstructionQueryBundle(
            query_str=query,
            instruction=applied,
            embedding=embedding,
            llm_weight=llm_weight,
            instruction_strength=instruction_strength,
        )

    def _per_query_instructions(
        self, queries: list[str], instructions: str | None | Sequence[str | None]
    ) -> list[str | None]:
        """One instruction per query (instemb_rag's one rule); None means ``query_instruction``."""
        return per_item_instructions(instructions, len(queries), texts="queries", default=self.query_instruction)

    def _per_query_knobs(
        self, queries: list[str], llm_weight: float | None, instruction_strength: float | None = None
    ) -> list[tuple[float | None, float | None]]:
        """Each query's (llm_weight, instruction_strength): the call's, else its string's own, else
        the field's (checked: in range, on a model that takes the knob)."""
        weights = [llm_weight if llm_weight is not None else llm_weight_of(query) for query in queries]
        weights = [self.llm_weight if weight is None else weight for weight in weights]
        strengths = [
            instruction_strength if instruction_strength is not None else instruction_strength_of(query)
            for query in queries
        ]
        strengths = [self.instruction_strength if strength is None else strength for strength in strengths]
        for weight in set(weights):
            require_llm_weight(self._encoder, weight)
        for strength in set(strengths):
            require_instruction_strength(self._encoder, strength)
        return list(zip(weights, strengths))

    def _embed_queries(
        self,
        queries: list[str],
        instructions: list[str | None],
        knobs: list[tuple[float | None, float | None]] | None = None,
    ) -> list[Embedding]:
        """The cache, then one encoder call per (llm_weight, instruction_strength) for what it lacks
        (no events: callers report). Queries are checked strings (check_texts); str() drops an
        InstructedText's own."""
        knobs = knobs if knobs is not None else [(self.llm_weight, self.instruction_strength)] * len(queries)
        keys = [
            QueryKey(self.fingerprint, instruction, str(query), *knob)
            for query, instruction, knob in zip(queries, instructions, knobs)
        ]
        results: list[Embedding | None] = [self._query_cache.get(key) for key in keys]
        missing = [position for position, found in enumerate(results) if found is None]
        if missing:
            warn_if_truncated(self._encoder, [queries[i] for i in missing], [instructions[i] for i in missing], "query")
        for knob in dict.fromkeys(knobs[i] for i in missing):  # one call per weight and strength, in order
            group = [i for i in missing if knobs[i] == knob]
            with self._model_lock:
                fresh = self._encoder.encode_queries(
                    [str(queries[i]) for i in group],
                    [instructions[i] for i in group],
                    batch_size=self.embed_batch_size,
                    **query_knobs(*knob),  # only a model with that knob gets one
                )
            for position, vector in zip(group, fresh.tolist()):
                self._query_cache.put(keys[position], vector)
                results[position] = vector
        return results  # type: ignore[return-value]

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
        check_texts([query], "query")
        knobs = self._per_query_knobs([query], None)
        return self._embed_queries([query], [self.resolve_instruction(instruction_of(query))], knobs)[0]

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
        texts = list(texts)
        check_texts(texts, "document")
        self._warn_if_documents_truncated(texts)
        vectors: list[Embedding] = []
        with _progress(len(texts), show_progress) as progress:
            for batch in _slices(texts, self.embed_batch_size):
                with self._document_call(batch) as call:
                    call.vectors = self._get_text_embeddings(batch)
                vectors += call.vectors
                progress.update(len(batch))
        return vectors

    @dispatcher.span
    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        texts = list(texts)
        check_texts(texts, "document")
        self._warn_if_documents_truncated(texts)
        vectors: list[Embedding] = []
        with _progress(len(texts), show_progress) as progress:
            for batch in _slices(texts, self.embed_batch_size):
                with self._document_call(batch) as call:
                    call.vectors = await asyncio.to_thread(self._get_text_embeddings, batch)
                vectors += call.vectors
                progress.update(len(batch))
        return vectors

    def _warn_if_documents_truncated(self, texts: list[str]) -> None:
        instruction = normalize_instruction(self.text_instruction)
        warn_if_truncated(self._encoder, texts, [instruction] * len(texts), "document")

    def _document_call(self, batch: list[str]):
        instructions = [normalize_instruction(self.text_instruction)] * len(batch)
        kind: InputType = "document"
        return embedding_call(self.callback_manager, self.to_payload(), batch, instructions, kind)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        check_texts(texts, "document")
        instruction = normalize_instruction(self.text_instruction)
        if self._document_cache is None:
            return self._encode_documents(texts, instruction)
        keys = [DocumentEmbeddingCache.key(self.document_fingerprint, instruction, text) for text in texts]
        results = self._document_cache.get_many(keys)
        missing = [position for position, found in enumerate(results) if found is None]
        if missing:
            fresh = self._encode_documents([texts[i] for i in missing], instruction)
            self._document_cache.put_many([keys[i] for i in missing], fresh)
            for position, vector in zip(missing, fresh):
                results[position] = vector
        return results  # type: ignore[return-value]

    def _encode_documents(self, texts: list[str], instruction: str | None) -> list[Embedding]:
        # Documents go through the encoder's document side; it sorts each slice by length so padding stays small.
        with self._model_lock:
            vectors = self._encoder.encode_documents(texts, instruction=instruction, batch_size=self.embed_batch_size)
        return vectors.tolist()

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _progress(total: int, show: bool):
    """The bar LlamaIndex shows for ``show_progress=True`` ("Generating embeddings"), per text."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="Generating embeddings", disable=not show)


def _slices(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
