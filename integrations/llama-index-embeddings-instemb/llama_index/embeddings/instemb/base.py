"""InstEmbEmbedding: LlamaIndex's BaseEmbedding over an instemb-rag encoder (or a server's).

The work is instemb_rag's: ``open_encoder`` (instemb_rag/client/sources.py) loads the model, wraps
one already loaded, or reaches a running ``instemb-rag serve`` (``base_url``: no torch here), and
checks a saved fingerprint; an ``Embedder`` (client/embedder.py) holds the encoder with its lock,
query and document caches and truncation warning. This class adds LlamaIndex's fields, views and
serialisation (``to_dict`` / ``from_dict`` and pickling rebuild the same encoder); calls.py its calls.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr, field_validator

from instemb_rag.client.embedder import Embedder
from instemb_rag.client.sources import open_encoder
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION, normalize_instruction  # torch-free
from instemb_rag.queries import QueryKnobs

from .calls import EmbeddingCalls

if TYPE_CHECKING:  # torch is imported only when a local encoder is loaded
    from instemb_rag import InstEmbEncoder

DEFAULT_MODEL_NAME = "instemb-default"
DOCUMENT_ADVICE = (  # the truncation warning's advice for documents (instemb_rag/client/limits.py)
    "Split documents into chunks the model reads whole: transformations=[embed_model.node_parser()] "
    "(chunks of embed_model.recommended_chunk_size tokens, at most {limit})."
)


class InstEmbEmbedding(EmbeddingCalls, BaseEmbedding):
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
    llm_weight: float | None = Field(
        default=None, frozen=True, description="A two-space model's LLM share of a query's score, 0..1; None: its own."
    )
    instruction_strength: float | None = Field(
        default=None, frozen=True, description="An instruction-effect model's strength, 0..10; None: its own."
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
            fields.update(settings, fingerprint=loaded.fingerprint, **asdict(knobs.require(loaded)))
            super().__init__(**fields, **kwargs)  # the settings and the fingerprint as the encoder runs them
        except BaseException:
            if remote:
                loaded.close()
            raise
        self._embedder, self._document_instruction, self._owns_remote = embedder, document_instruction, remote

    @field_validator("query_instruction", "text_instruction")
    @classmethod
    def _instruction_is_text(cls, value: Any) -> str | None:
        normalize_instruction(value)  # refuses a non-string, naming it
        return value

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
        """A view whose queries are weighed with ``llm_weight`` (a two-space model's, 0..1)."""
        return self._view(llm_weight=QueryKnobs.checked(llm_weight).require(self.encoder).llm_weight)

    def with_instruction_strength(self, instruction_strength: float | None) -> InstEmbEmbedding:
        """A view whose queries are read at ``instruction_strength`` (an instruction-effect model's, 0..10)."""
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
