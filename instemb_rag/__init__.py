"""instemb-rag: instruction-following retrieval with InstEmb look-ahead embeddings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .instructions import normalize_instruction

if TYPE_CHECKING:
    from .encoder import InstEmbEncoder
    from .reader import Reranker

__all__ = ["InstEmbEncoder", "Reranker", "normalize_instruction"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so that `import instemb_rag.errors` (e.g. an app talking to `instemb-rag serve`
    # through the LlamaIndex integration) does not load torch.
    if name == "InstEmbEncoder":
        from .encoder import InstEmbEncoder

        return InstEmbEncoder
    if name == "Reranker":
        from .reader import Reranker

        return Reranker
    raise AttributeError(f"module 'instemb_rag' has no attribute {name!r}")
