"""LlamaIndex integration for InstEmb instruction-following embeddings.

The LlamaIndex shapes (an embedding, a retriever, the instruction carriers, a fusion retriever, a
node parser, vector stores) over instemb_rag's own: its encoders and their loading, the embedder and
its caches (instemb_rag.client), the checks of a query's inputs (instemb_rag.queries) and the search
over an index folder (instemb_rag.index.retrieval). ``remote`` is instemb_rag.client.remote.
"""

from instemb_rag.client import remote  # noqa: F401  (the name the integration has always had)
from instemb_rag.client.caches import QueryEmbeddingCache, QueryKey
from instemb_rag.client.limits import TruncationWarning
from instemb_rag.client.remote import RemoteEncoder
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION

from .base import InstEmbEmbedding, InstructionEmbeddingStartEvent
from .node_parser import FILE_METADATA_KEYS, InstEmbNodeParser
from .query import InstructedText, InstructionQueryBundle
from .retriever import InstEmbRetriever, InstructionFusionRetriever
from .stores import faiss_vector_store, qdrant_vector_store

__all__ = [
    "DEFAULT_QUERY_INSTRUCTION",
    "FILE_METADATA_KEYS",
    "InstEmbEmbedding",
    "InstEmbNodeParser",
    "InstEmbRetriever",
    "InstructedText",
    "InstructionEmbeddingStartEvent",
    "InstructionFusionRetriever",
    "InstructionQueryBundle",
    "QueryEmbeddingCache",
    "QueryKey",
    "RemoteEncoder",
    "TruncationWarning",
    "faiss_vector_store",
    "qdrant_vector_store",
]
