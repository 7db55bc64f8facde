"""LlamaIndex vector stores sized and scored for InstEmb, from the integration's extras (``pip install
'llama-index-embeddings-instemb[faiss]'`` or ``[qdrant]``): an app needs at most one, an ``instemb-rag
index`` folder neither; a missing one is named with the command that installs it (instemb_rag.extras)."""

from __future__ import annotations

from typing import Any

from instemb_rag.extras import require

PACKAGE = "llama-index-embeddings-instemb"


def faiss_vector_store(embed_model: Any) -> Any:
    """An empty FaissVectorStore for ``embed_model``: inner product on its unit vectors (cosine), its width."""
    module = require("llama_index.vector_stores.faiss", "faiss", "The FAISS vector store", PACKAGE)
    import faiss

    return module.FaissVectorStore(faiss_index=faiss.IndexFlatIP(embed_model.dimension))


def qdrant_vector_store(collection_name: str, **client_options: Any) -> Any:
    """A Qdrant store on ``QdrantClient(**client_options)`` (``location=":memory:"``, ``path=...`` or
    ``url=...``) whose async calls work and whose ``close()`` / ``aclose()`` (or a ``with`` block)
    closes its clients, freeing a local ``path`` (qdrant_store.py); LlamaIndex makes the collection."""
    require("llama_index.vector_stores.qdrant", "qdrant", "The Qdrant vector store", PACKAGE)
    from .qdrant_store import InstEmbQdrantVectorStore

    return InstEmbQdrantVectorStore.open(collection_name, **client_options)
