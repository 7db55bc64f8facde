"""InstEmbEmbedding: LlamaIndex's BaseEmbedding over an InstEmbEncoder.

LlamaIndex asks an embedding model for a query embedding with the query string alone.
InstEmb embeds a query *together with an instruction*, so this class

* uses ``query_instruction`` for LlamaIndex's ordinary query paths (query engines,
  ``index.as_retriever()``), and
* offers ``get_query_embedding_for(query, instruction)`` / ``query_bundle(query, instruction)``
  for a per-call instruction: the returned QueryBundle carries the finished embedding, which
  every LlamaIndex vector retriever uses as is instead of re-embedding ``query_str``.

Documents (``text`` in LlamaIndex's words) are embedded once, under ``text_instruction``
(normally None: the document side of InstEmb carries no instruction).

With ``base_url`` the embeddings come from a running ``instemb-rag serve`` (RemoteEncoder in
remote.py) and neither torch nor the model is loaded in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import TYPE_CHECKING, Any, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from instemb_rag import normalize_instruction  # torch-free; the encoder is imported lazily
from instemb_rag.errors import InstEmbError

from .cache import QueryEmbeddingCache, QueryKey
from .query import InstructionQueryBundle

if TYPE_CHECKING:  # torch is imported only when a local encoder is loaded
    from instemb_rag import InstEmbEncoder

    from .remote import RemoteEncoder

DEFAULT_QUERY_INSTRUCTION = "Retrieve passages that answer the question."
DEFAULT_MODEL_NAME = "instemb-default"


class InstEmbEmbedding(BaseEmbedding):
    """InstEmb embeddings for LlamaIndex: one instruction per query, documents without one.

    Args:
        model_path: an InstEmb checkpoint folder, a Hugging Face decoder folder, or None for
            the default model shipped with instemb-rag.
        device: "auto" (CUDA when present), "cpu", "cuda", "cuda:1", ...
        query_instruction: used when LlamaIndex asks for a query embedding without an
            instruction (e.g. inside a query engine). "" or None means no instruction.
        text_instruction: instruction for document embeddings; None (the default) means none.
        query_cache_size: how many query embeddings to keep (LRU keyed on encoder
            fingerprint, instruction and text); 0 turns the cache off.
        encoder: an already-loaded InstEmbEncoder to use instead of loading ``model_path``.
        base_url: URL of a running ``instemb-rag serve`` (e.g. "http://127.0.0.1:8000"): embed
            through its /v1/embeddings instead of loading a model here (no torch import).
        api_key: the server's key (Bearer); default: the INSTEMB_API_KEY environment variable.
    """

    model_path: str | None = Field(
        default=None, description="Checkpoint or model folder; None means the default model."
    )
    device: str = Field(default="auto", description="Torch device, or 'auto'.")
    query_instruction: str | None = Field(
        default=DEFAULT_QUERY_INSTRUCTION,
        description="Instruction for query embeddings requested without one.",
    )
    text_instruction: str | None = Field(
        default=None, description="Instruction for document embeddings (normally None)."
    )
    query_cache_size: int = Field(
        default=1024, ge=0, description="Query embeddings kept in the LRU cache; 0 disables it."
    )
    base_url: str | None = Field(
        default=None, description="URL of a running `instemb-rag serve`; None loads the model locally."
    )
    api_key: str | None = Field(default=None, exclude=True, repr=False, description="Bearer key for base_url.")

    _encoder: InstEmbEncoder | RemoteEncoder = PrivateAttr()
    _query_cache: QueryEmbeddingCache = PrivateAttr()
    # One forward pass at a time: the async methods run the encoder in worker threads.
    _model_lock: Any = PrivateAttr()

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
        **kwargs: Any,
    ):
        if kwargs.get("embeddings_cache") is not None:
            # LlamaIndex's embeddings_cache keys on the text alone, so two instructions (or two
            # checkpoints) would silently share entries.
            raise InstEmbError(
                "InstEmbEmbedding does not accept embeddings_cache: it keys on the text only and "
                "would mix up embeddings made under different instructions. Use query_cache_size "
                "(keyed on fingerprint, instruction and text) instead."
            )
        model_path = None if model_path is None else str(model_path)
        if base_url is not None and (model_path is not None or encoder is not None):
            raise InstEmbError(
                "Give either base_url (embed through a running `instemb-rag serve`) or model_path/encoder "
                "(load the model here), not both."
            )
        remote = None
        if base_url is not None:
            from .remote import RemoteEncoder

            remote = RemoteEncoder(base_url, api_key=api_key, timeout=timeout)
            kwargs.setdefault("model_name", remote.model_id)
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
            **kwargs,
        )
        if remote is not None:
            self._encoder = remote
        elif encoder is not None:
            self._encoder = encoder
        else:
            from instemb_rag import InstEmbEncoder

            self._encoder = InstEmbEncoder.from_pretrained(model_path, device=device)
        self._query_cache = QueryEmbeddingCache(query_cache_size)
        # Local: one forward pass at a time. Remote: the server batches concurrent requests itself.
        self._model_lock = contextlib.nullcontext() if remote is not None else threading.Lock()

    @classmethod
    def from_encoder(cls, encoder: InstEmbEncoder, **kwargs: Any) -> InstEmbEmbedding:
        """Wrap an encoder that is already loaded (e.g. shared with an indexer)."""
        kwargs.setdefault("model_name", str(encoder.config.base_model))
        return cls(encoder=encoder, device=str(encoder.device), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "InstEmbEmbedding"

    # ------------------------------------------------------------------ identity
    @property
    def encoder(self) -> InstEmbEncoder | RemoteEncoder:
        """The local InstEmbEncoder, or with base_url the RemoteEncoder (same encode_* API)."""
        return self._encoder

    @property
    def is_remote(self) -> bool:
        return self.base_url is not None

    @property
    def fingerprint(self) -> str:
        return self._encoder.fingerprint

    @property
    def dimension(self) -> int:
        return self._encoder.dimension

    @property
    def query_cache(self) -> QueryEmbeddingCache:
        return self._query_cache

    def to_payload(self) -> dict[str, Any]:
        payload = super().to_payload()
        payload.update(fingerprint=self.fingerprint, query_instruction=self.query_instruction)
        return payload

    # ------------------------------------------------------------------ instruction-aware queries
    def resolve_instruction(self, instruction: str | None) -> str | None:
        """None means "the default query_instruction"; "" means "no instruction at all"."""
        chosen = self.query_instruction if instruction is None else instruction
        return normalize_instruction(chosen)

    def get_query_embeddings(
        self, queries: Sequence[str], instructions: str | None | Sequence[str | None] = None
    ) -> list[Embedding]:
        """Embed many queries, each under its own instruction, in as few forward passes as possible.

        ``instructions`` is one string (or None) for all queries, or one entry per query.
        Cached embeddings are reused; the rest are encoded in one batched call.
        """
        queries = list(queries)
        per_query = self._per_query_instructions(queries, instructions)
        keys = [QueryKey(self.fingerprint, instruction, query) for query, instruction in zip(queries, per_query)]
        results: list[Embedding | None] = [self._query_cache.get(key) for key in keys]
        missing = [position for position, found in enumerate(results) if found is None]
        if missing:
            with self._model_lock:
                fresh = self._encoder.encode_queries(
                    [queries[i] for i in missing],
                    [per_query[i] for i in missing],
                    batch_size=self.embed_batch_size,
                )
            for position, vector in zip(missing, fresh.tolist()):
                self._query_cache.put(keys[position], vector)
                results[position] = vector
        return results  # type: ignore[return-value]

    def get_query_embedding_for(self, query: str, instruction: str | None = None) -> Embedding:
        """One query under its own instruction (None: ``query_instruction``; "": none)."""
        return self.get_query_embeddings([query], [instruction])[0]

    async def aget_query_embedding_for(self, query: str, instruction: str | None = None) -> Embedding:
        return await asyncio.to_thread(self.get_query_embedding_for, query, instruction)

    async def aget_query_embeddings(
        self, queries: Sequence[str], instructions: str | None | Sequence[str | None] = None
    ) -> list[Embedding]:
        return await asyncio.to_thread(self.get_query_embeddings, queries, instructions)

    def query_bundle(self, query: str, instruction: str | None = None) -> InstructionQueryBundle:
        """A QueryBundle whose embedding already reflects ``instruction``.

        Pass it to any LlamaIndex retriever or query engine (``retriever.retrieve(bundle)``,
        ``query_engine.query(bundle)``): vector retrievers use a bundle's embedding as given.
        """
        resolved = self.resolve_instruction(instruction)
        return InstructionQueryBundle(
            query_str=query,
            instruction=resolved,
            embedding=self.get_query_embedding_for(query, "" if resolved is None else resolved),
        )

    async def aquery_bundle(self, query: str, instruction: str | None = None) -> InstructionQueryBundle:
        return await asyncio.to_thread(self.query_bundle, query, instruction)

    def _per_query_instructions(
        self, queries: list[str], instructions: str | None | Sequence[str | None]
    ) -> list[str | None]:
        if instructions is None or isinstance(instructions, str):
            return [self.resolve_instruction(instructions)] * len(queries)
        instructions = list(instructions)
        if len(instructions) != len(queries):
            raise InstEmbError(
                f"Got {len(queries)} queries but {len(instructions)} instructions: give one "
                "instruction per query, a single string for all, or None for query_instruction."
            )
        return [self.resolve_instruction(instruction) for instruction in instructions]

    # ------------------------------------------------------------------ BaseEmbedding interface
    def _get_query_embedding(self, query: str) -> Embedding:
        return self.get_query_embedding_for(query, None)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await self.aget_query_embedding_for(query, None)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        # LlamaIndex already slices texts into embed_batch_size chunks; the encoder sorts each
        # chunk by length so padding stays small.
        with self._model_lock:
            vectors = self._encoder.encode_documents(
                texts, instruction=self.text_instruction or None, batch_size=self.embed_batch_size
            )
        return vectors.tolist()

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
