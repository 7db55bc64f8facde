"""What code outside encoder/ may call on an encoder: three protocols, each a superset of the last.

    Encoder         embed and identify: what the index's search, eval's tasks, the LlamaIndex
                    integration (and its RemoteEncoder) and eval's SharedForward views call
    LocalEncoder    an encoder in this process, its tokens visible: the indexer (chunking with
                    its tokenizer, the manifest's template), the server (usage tokens, the model
                    card's max_length), MTEB's item-wise passages
    ForwardEncoder  the forward pass by its parts: eval's SharedForward and the trainer

``InstEmbEncoder`` (model.py) is all three. The protocols are for type hints (``from
instemb_rag.encoder.protocol import Encoder``) and ``isinstance`` checks of the members' names;
importing this module loads neither torch nor the model.

Two fingerprints: ``fingerprint`` identifies the whole encoder (what an index and its queries
must share; every weight, template, pooling, precision), ``document_fingerprint`` only what
embeds documents (a corpus embedding could be reused while only the query side changes). They
are equal for today's symmetric encoder; a two-tower encoder (documents by a small sentence
encoder, queries by the LLM) tells them apart. Today every check and cache uses ``fingerprint``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

from ..instructions import Instructions
from ..knobs import KNOBS

if TYPE_CHECKING:
    import numpy as np  # annotations only: the query client imports this module
    import torch

    from .modules.forward import States
    from .modules.pooling import Pooling
    from .modules.template import PromptTemplate

__all__ = ["Encoder", "ForwardEncoder", "LocalEncoder", "query_knob", "query_knobs"]


def query_knobs(encoder: Any) -> tuple[str, ...]:
    """The query-time knobs ``encoder`` takes (knobs.py's declarations; ``encode_queries(..., name=)``
    and ``explain``). Encoders declare each by ``takes_<name>`` (a composed encoder from its query
    route's ``knobs``, a RemoteEncoder from its server's model card); one that says nothing has none."""
    return tuple(name for name in KNOBS if getattr(encoder, f"takes_{name}", False) is True)


def query_knob(encoder: Any) -> str | None:
    """The query-time knob ``encoder`` takes (its first, where a route takes several), or None."""
    return next(iter(query_knobs(encoder)), None)


def __getattr__(name: str):
    # The older per-knob tests (takes_<name>(encoder)), read from the declarations.
    if name.startswith("takes_") and name[len("takes_") :] in KNOBS:
        knob = name[len("takes_") :]
        return lambda encoder: knob in query_knobs(encoder)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@runtime_checkable
class Encoder(Protocol):
    """Embeds queries (each under its own instruction) and documents; says which weights do."""

    @property
    def fingerprint(self) -> str:
        """Identifies the whole encoder: everything that shapes an embedding."""
        ...

    @property
    def document_fingerprint(self) -> str:
        """Identifies what embeds documents (``fingerprint`` for a symmetric encoder)."""
        ...

    @property
    def dimension(self) -> int:
        """Width of the embeddings."""
        ...

    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs: Any) -> np.ndarray:
        """L2-normalised float32 [N, d]; ``instructions``: one per query, one string for all, or None."""
        ...

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs: Any) -> np.ndarray:
        """L2-normalised float32 [N, d], all under one optional instruction."""
        ...


@runtime_checkable
class LocalEncoder(Encoder, Protocol):
    """An encoder running in this process, whose token ids can be seen."""

    tokenizer: Any  # a transformers tokenizer: the indexer chunks documents with it
    template: PromptTemplate  # the prompt layout; the index manifest records its config

    @property
    def max_length(self) -> int:
        """Tokens per input at most (longer inputs are cut)."""
        ...

    @property
    def device(self) -> torch.device: ...

    def build_ids(self, text: str, instruction: str | None, lookahead_length: int | None = None) -> list[int]:
        """The token ids one input runs as (the server counts usage with them)."""
        ...

    def encode(
        self, texts: Sequence[str], instructions: Instructions = None, batch_size: int = 16, show_progress: bool = False
    ) -> np.ndarray:
        """Like ``encode_queries``: each text under its own instruction (MTEB's instructed passages)."""
        ...


@runtime_checkable
class ForwardEncoder(LocalEncoder, Protocol):
    """The forward pass by its parts: collate ids, run the backbone, pool, project.

    The trainer also owns the module itself (its parameters, adapter, ``save``); what it calls
    to build inputs and embeddings is listed here."""

    backbone: Any  # the base model (its ``reference`` names it in results)
    training_info: dict  # provenance of a trained model ({} untrained)

    @property
    def lookahead_length(self) -> int:
        """Look-ahead tokens used at inference."""
        ...

    @property
    def pooling(self) -> Pooling: ...

    def with_options(
        self, pooling: str | None = None, lookahead_length: int | None = None, max_length: int | None = None
    ) -> ForwardEncoder:
        """The same weights under other settings (another fingerprint)."""
        ...

    def collate(self, id_lists: Sequence[list[int]], padding_side: str | None = None) -> dict[str, torch.Tensor]: ...

    def states(self, batch: dict[str, torch.Tensor], cache: Any = None, embed_dropout: float = 0.0) -> States:
        """Final-layer hidden states and mask of a collated batch."""
        ...

    def embed_states(self, states: States, lookahead_length: int | None = None) -> torch.Tensor:
        """Pooled and projected: the un-normalised embeddings [B, d]."""
        ...

    def project(self, pooled: torch.Tensor) -> torch.Tensor:
        """Pooled states through the projection head (identity without one)."""
        ...
