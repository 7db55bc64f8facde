"""The reader's second stage in the dev harness: each query's top hits re-scored as the product does.

``Index.search(..., rerank=True)`` re-scores the first stage's top ``reranker.top`` hits with the
fused score (reader/reranker.py) and leaves the rest at their first-stage score, which is never
above a re-scored hit's (fused >= first stage). Here the same happens to a score matrix: each row's
top columns get ``Reranker.score``'s values, so every task that ranks or compares scores (retrieval,
stance pairs, facet groups) measures what a user would get.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["rerank_description", "reranked_matrix"]


def reranked_matrix(
    reranker, scores: np.ndarray, texts: Sequence[str], query_texts: Sequence[str], instructions
) -> np.ndarray:
    """``scores`` [queries, documents] with each row's top ``reranker.top`` entries fused with the reader's."""
    if reranker is None:
        return scores
    scores = np.array(scores, dtype=np.float64, copy=True)
    if isinstance(instructions, str) or instructions is None:
        instructions = [instructions] * scores.shape[0]
    depth = min(reranker.top, scores.shape[1])
    for row in range(scores.shape[0]):
        top = np.argsort(-scores[row], kind="stable")[:depth]
        fused = reranker.score(
            query_texts[row], instructions[row], [texts[column] for column in top], scores[row, top].tolist()
        )
        scores[row, top] = fused
    return scores


def rerank_description(reranker) -> dict:
    """What a run with the reader records beside the encoder's identity (``compare`` pairs it as another ranker)."""
    return {
        "label_suffix": f"+ reader (top {reranker.top}, w {reranker.fusion_weight})",
        "reranker": {"source": str(reranker.source), "top": reranker.top, "fusion_weight": reranker.fusion_weight},
    }
