"""instemb-rag: instruction-following retrieval with InstEmb look-ahead embeddings."""

from .encoder import InstEmbEncoder

__all__ = ["InstEmbEncoder"]
__version__ = "0.1.0"
