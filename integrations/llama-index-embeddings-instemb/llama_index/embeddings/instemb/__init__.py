"""LlamaIndex integration for InstEmb instruction-following embeddings: LlamaIndex's shapes over
instemb_rag's encoders, embedder (instemb_rag.client), query checks and index retrieval."""

from instemb_rag.client import remote  # noqa: F401  (the name the integration has always had)
from instemb_rag.client.caches import QueryEmbeddingCache, QueryKey
from instemb_rag.client.limits import TruncationWarning
from instemb_rag.client.remote import RemoteEncoder
from instemb_rag.instructions import DEFAULT_QUERY_INSTRUCTION

from .base import FILE_METADATA_KEYS, InstEmbEmbedding, InstEmbNodeParser, InstructionEmbeddingStartEvent
from .query import InstructedText, InstructionQueryBundle
from .rerank import InstEmbRerank
from .retriever import InstEmbRetriever, InstructionFusionRetriever
from .stores import faiss_vector_store, qdrant_vector_store

__all__ = [
    "DEFAULT_QUERY_INSTRUCTION",
    "FILE_METADATA_KEYS",
    "InstEmbEmbedding",
    "InstEmbNodeParser",
    "InstEmbRerank",
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
