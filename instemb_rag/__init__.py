"""instemb-rag: instruction-following retrieval with InstEmb look-ahead embeddings."""

from .instructions import normalize_instruction

__all__ = ["InstEmbEncoder", "normalize_instruction"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Loaded on first use, so `instemb-rag --help` and light submodules do not import torch.
    if name == "InstEmbEncoder":
        from .encoder import InstEmbEncoder

        return InstEmbEncoder
    raise AttributeError(f"module 'instemb_rag' has no attribute {name!r}")
