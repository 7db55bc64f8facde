"""InstEmbEmbedding: LlamaIndex's BaseEmbedding over an InstEmbEncoder (or a server's).

LlamaIndex asks an embedding model for a query embedding with the query string alone; InstEmb
embeds a query *with an instruction*. So this class uses ``query_instruction`` on LlamaIndex's own
query paths (none by default, as the CLI and the server), embeds a query string that carries its
own instruction (``InstructedText``, what an ``InstructionQueryBundle`` hands a retriever) under
that one, and offers ``get_query_embedding_for(query, instruction)``, ``query_bundle`` and
``with_instruction`` (a view sharing the loaded encoder). A two-space model's ``llm_weight`` and an
instruction-effect model's ``instruction_strength`` are taken as fields, per call or per query
string, and by the ``with_llm_weight`` / ``with_instruction_strength`` views.

The work is instemb_rag's (instemb_rag/client/): an ``Embedder`` holds the encoder, its lock and
the query and document caches, and warns when a text is cut; a query's inputs are checked once,
where they enter here (instemb_rag/queries.py). This class adds LlamaIndex's types and reports
every call, query or document, with its instructions (events.py). The fields say which model this
is, so ``to_dict``/``from_dict`` and pickling rebuild the same encoder and refuse one whose
fingerprint differs. With ``base_url`` the embeddings come from a running ``instemb-rag serve``
(instemb_rag.client.remote.RemoteEncoder) and neither torch nor the model is loaded here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr, field_validator

from instemb_rag.client.embedder import Embedder
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION, normalize_instruction  # torch-free
from instemb_rag.queries import QueryKnobs

from .calls import EmbeddingCalls
from .loading import check_fingerprint, load_encoder

if TYPE_CHECKING:  # torch is imported only when a local encoder is loaded
    from instemb_rag import InstEmbEncoder

DEFAULT_MODEL_NAME = "instemb-default"

# The truncation warning's advice for documents (instemb_rag/client/limits.py).
DOCUMENT_ADVICE = (
    "Split documents into chunks the model reads whole: transformations=[embed_model.node_parser()] "
    "(chunks of embed_model.recommended_chunk_size tokens, at most {limit})."
)


class InstEmbEmbedding(EmbeddingCalls, BaseEmbedding):
    """InstEmb embeddings for LlamaIndex: one instruction per query, documents without one.

    Args (each field's description says more):
        model_path: an InstEmb checkpoint or model folder, a Hugging Face decoder folder, or None
            for the default model shipped with instemb-rag.
        device: "auto" (CUDA when present), "cpu", "cuda", "cuda:1", ...
        query_instruction: for queries LlamaIndex asks for without one ("" or None: none).
        text_instruction: for documents (None, the default: none); a model whose documents a
            sentence encoder embeds refuses one.
        llm_weight: a two-space model's LLM share of a query's score, 0..1 (None: the model's own).
        instruction_strength: an instruction-effect model's, how much the instruction moves a
            query's ranking, 0..10 (0: plain search; None: the model's own). A model without the
            knob refuses one, as an encoder of one space refuses ``llm_weight``.
        pooling, lookahead_length, max_length, precision: the encoder's settings (None: the
            checkpoint's own); after loading, the fields hold what the encoder uses.
        fingerprint: the encoder this embedding must be (set by to_dict); another is refused.
        query_cache_size: query embeddings kept (LRU on fingerprint, instruction, text, knobs).
        embeddings_cache: a LlamaIndex ``BaseKVStore`` for document embeddings, keyed on the
            document side's fingerprint, ``text_instruction`` and the text (not saved: pass it again).
        encoder: an InstEmbEncoder already loaded (``model_path`` says where it loads again).
        base_url, api_key, timeout: embed through a running ``instemb-rag serve`` (no torch here);
            the key defaults to the INSTEMB_API_KEY environment variable.
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
    # LlamaIndex's field, used for documents only and keyed on more than the text (client/caches.py). A
    # live store (a file's contents, a Redis connection), so neither to_dict nor pickling carries it.
    embeddings_cache: Any = Field(
        default=None,
        exclude=True,
        repr=False,
        description="A LlamaIndex BaseKVStore for document embeddings (keyed on encoder, instruction and text).",
    )
    timeout: float = Field(default=60.0, gt=0, description="Seconds the server may take to answer (base_url).")

    # The encoder, its lock and caches (shared by with_* views), and the document instruction as read.
    _embedder: Embedder = PrivateAttr()
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
        knobs = QueryKnobs.checked(llm_weight, instruction_strength)  # in range, before any model loads
        asked = {"pooling": pooling, "lookahead_length": lookahead_length, "max_length": max_length}
        loaded, settings = load_encoder(
            model_path, encoder, base_url, api_key, timeout, device, precision=precision, **asked
        )
        if base_url is not None:
            kwargs.setdefault("model_name", loaded.model_id)
        try:
            check_fingerprint(fingerprint, loaded.fingerprint, model_path, base_url)
            embedder = Embedder(
                loaded, query_cache_size, kwargs.get("embeddings_cache"), base_url is not None, DOCUMENT_ADVICE
            )
            document_instruction = normalize_instruction(text_instruction)
            if embedder.local:  # (a server's model refuses one itself: 400)
                loaded.document_side.refuse_instruction(document_instruction)
            knobs.require(loaded)
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
                llm_weight=knobs.llm_weight,
                instruction_strength=knobs.instruction_strength,
                **settings,
                **kwargs,
            )
        except BaseException:
            if base_url is not None:
                loaded.close()
            raise
        self._embedder = embedder
        self._document_instruction = document_instruction
        self._owns_remote = base_url is not None

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

    # ------------------------------------------------------------------ views (sharing the encoder)
    def with_instruction(self, instruction: str | None) -> InstEmbEmbedding:
        """A view of this embedding whose query_instruction is ``instruction`` ("" or None: none).

        It shares the loaded encoder, its lock and the query cache (keyed on the instruction),
        so it costs nothing; pass it as ``index.as_retriever(embed_model=...)`` or
        ``index.as_query_engine(embed_model=...)``. Closing it closes nothing; close the original.
        """
        normalize_instruction(instruction)
        return self._view(query_instruction=instruction)

    def with_llm_weight(self, llm_weight: float | None) -> InstEmbEmbedding:
        """A view whose queries are weighed with ``llm_weight`` (a two-space model's LLM share, 0..1;
        None: the model's own), as ``with_instruction``; an encoder of one space refuses one."""
        return self._view(llm_weight=QueryKnobs.checked(llm_weight).require(self.encoder).llm_weight)

    def with_instruction_strength(self, instruction_strength: float | None) -> InstEmbEmbedding:
        """A view whose queries are read at ``instruction_strength`` (an instruction-effect model's,
        0..10; None: the model's own), as ``with_llm_weight``."""
        knobs = QueryKnobs.checked(instruction_strength=instruction_strength).require(self.encoder)
        return self._view(instruction_strength=knobs.instruction_strength)

    def _view(self, **update: Any) -> InstEmbEmbedding:
        view = self.model_copy(update=update)
        view._owns_remote = False
        return view

    # ------------------------------------------------------------------ identity and lifetime
    @property
    def encoder(self) -> Any:
        """The local InstEmbEncoder, or with base_url the RemoteEncoder (same encode_* API)."""
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
        payload = super().to_payload()
        names = ("fingerprint", "query_instruction", "text_instruction", "llm_weight", "instruction_strength")
        payload.update({name: getattr(self, name) for name in names})
        return payload

    def __getstate__(self) -> dict[str, Any]:
        # The encoder, its lock and caches are rebuilt from the fields on unpickling (the fingerprint
        # is checked), so none of them is pickled; nor are the callback manager's handlers (they
        # belong to this process) and the embeddings_cache's store (a live object: pass it again).
        state = BaseModel.__getstate__(self)
        state["__pydantic_private__"] = None
        state["__dict__"] = {
            key: value
            for key, value in state["__dict__"].items()
            if key not in ("callback_manager", "embeddings_cache")
        }
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # LlamaIndex's __setstate__ swallows a failed __init__; a wrong model must fail loudly.
        self.__init__(**state["__dict__"])
