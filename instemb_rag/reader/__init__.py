"""The reader (issue 67): a cross-encoder that reads the instruction, the query and each top hit
together and re-orders the first stage's top hits (model.py the network, reranker.py the fusion
and the public ``Reranker``, folder.py a model folder with a reader)."""

from .reranker import ReaderMissingError, Reranker, RerankResult, RerankRoute, fused_scores

__all__ = ["ReaderMissingError", "RerankResult", "RerankRoute", "Reranker", "fused_scores"]
