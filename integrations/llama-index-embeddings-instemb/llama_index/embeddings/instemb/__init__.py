"""LlamaIndex integration for InstEmb instruction-following embeddings."""

from instemb_rag.client.caches import QueryEmbeddingCache, QueryKey
from instemb_rag.client.limits import TruncationWarning
from instemb_rag.client.remote import RemoteEncoder
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION

from .base import InstEmbEmbedding
from .events import InstructionEmbeddingStartEvent
from .fusion import InstructionFusionRetriever
from .node_parser import FILE_METADATA_KEYS, InstEmbNodeParser
from .query import InstructedText, InstructionQueryBundle
from .retriever import InstEmbRetriever
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
