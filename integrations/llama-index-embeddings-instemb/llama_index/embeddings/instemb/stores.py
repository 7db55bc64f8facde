"""LlamaIndex vector stores sized and scored for InstEmb, from the integration's extras.

The vector-store packages are extras (``pip install 'llama-index-embeddings-instemb[faiss]'`` or
``[qdrant]``): an app needs at most one, and an ``instemb-rag index`` folder needs neither. A
missing one is named with the command that installs it.
"""

from __future__ import annotations

import importlib
from typing import Any

from instemb_rag.errors import InstEmbError

EXTRAS = {
    "faiss": "llama_index.vector_stores.faiss",
    "qdrant": "llama_index.vector_stores.qdrant",
}


def require_extra(extra: str) -> Any:
    """The vector-store module of ``extra``, or an error that says how to install it."""
    try:
        return importlib.import_module(EXTRAS[extra])
    except ImportError as error:
        raise InstEmbError(
            f"The {extra} vector store needs the integration's [{extra}] extra ({error}): "
            f"pip install 'llama-index-embeddings-instemb[{extra}]'"
        ) from None


def faiss_vector_store(embed_model: Any) -> Any:
    """An empty FaissVectorStore for ``embed_model``: inner product on its L2-normed vectors
    (cosine similarity), its dimension."""
    module = require_extra("faiss")
    import faiss

    return module.FaissVectorStore(faiss_index=faiss.IndexFlatIP(embed_model.dimension))


def qdrant_vector_store(collection_name: str, **client_options: Any) -> Any:
    """A QdrantVectorStore on ``QdrantClient(**client_options)`` (e.g. ``location=":memory:"``,
    ``path="qdrant-data"`` or ``url=...``); LlamaIndex creates the collection on first insert."""
    module = require_extra("qdrant")
    from qdrant_client import QdrantClient

    return module.QdrantVectorStore(collection_name=collection_name, client=QdrantClient(**client_options))
