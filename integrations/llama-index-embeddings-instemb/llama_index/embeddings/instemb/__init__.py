"""LlamaIndex integration for InstEmb instruction-following embeddings."""

from .base import DEFAULT_QUERY_INSTRUCTION, InstEmbEmbedding
from .cache import QueryEmbeddingCache, QueryKey
from .query import InstructionQueryBundle
from .remote import RemoteEncoder
from .retriever import InstEmbRetriever

__all__ = [
    "DEFAULT_QUERY_INSTRUCTION",
    "InstEmbEmbedding",
    "InstEmbRetriever",
    "InstructionQueryBundle",
    "QueryEmbeddingCache",
    "QueryKey",
    "RemoteEncoder",
]
