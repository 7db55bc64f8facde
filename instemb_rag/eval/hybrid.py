"""Any task scored hybrid (``instemb-rag eval --hybrid rrf|z``): the dense scores fused with a
lexical ranking of the same documents, exactly as ``Index.search(..., hybrid=...)`` fuses them.

The lexical side is the index's own by default: the documents in an in-memory SQLite FTS5 table
with the catalog's tokenizer and bm25() (index/fulltext.py), asked with the same MATCH expression
(the query and the instruction's content words); ``engine="bm25s"`` asks bm25s instead (Okapi
BM25, English stopwords, no stemming), to compare the two engines. Fusion is index/fusion.py's
``fuse`` over each side's ``CANDIDATE_DEPTH`` best, so the figures are the product's.

Fused scores from different queries are not comparable, so a fused row is turned into rank
scores: the fused candidates in order, then every other document in dense order (a search never
returns those; the metrics that read deep ranks, p-MRR, see them in a well-defined order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..extras import require
from ..index import fulltext
from ..index.fusion import CANDIDATE_DEPTH, check_hybrid, fuse

ENGINES = ("fts5", "bm25s")
RERANK = "rerank"  # measured, not offered by search: the lexical side's candidates ordered by the dense score
INSTRUCTION_WORDS = ("content", "all", "none")


@dataclass(frozen=True)
class HybridSettings:
    """How the lexical side is asked and fused. ``weight`` 1.0 scores the lexical side alone."""

    mode: str = "rrf"
    weight: float = 0.5
    instruction_words: str = "content"  # fulltext.match_expression: content | all | none
    engine: str = "fts5"
    depth: int = CANDIDATE_DEPTH

    def __post_init__(self) -> None:
        from .data import EvalDataError

        check_hybrid(None if self.mode == RERANK else self.mode, None if self.mode == RERANK else self.weight)
        if self.engine not in ENGINES:
            raise EvalDataError(f"lexical engine {self.engine!r}: use one of {', '.join(ENGINES)}.")
        if self.instruction_words not in INSTRUCTION_WORDS:
            raise EvalDataError(f"instruction words {self.instruction_words!r}: use {', '.join(INSTRUCTION_WORDS)}.")

    def describe(self) -> dict:
        return asdict(self)

    def label(self) -> str:
        if self.mode == RERANK:
            return f"lexical {self.engine} ({self.instruction_words}) top {self.depth} re-ranked densely"
        if self.weight == 1.0:
            return f"lexical {self.engine} ({self.instruction_words} instruction words)"
        return f"hybrid {self.mode} w={self.weight} {self.engine} ({self.instruction_words})"


def lexical_matrix(
    settings: HybridSettings, documents: Sequence[str], queries: Sequence[str], instructions
) -> np.ndarray:
    """[queries, documents] lexical scores (0 = no query word); ``instructions`` one per query,
    or one (or None) for all."""
    if instructions is None or isinstance(instructions, str):
        instructions = [instructions] * len(queries)
    if settings.engine == "bm25s":
        return _bm25s_matrix(settings, documents, queries, instructions)
    db = fulltext.memory_fulltext(documents)
    try:
        scores = np.zeros((len(queries), len(documents)), dtype=np.float64)
        for row, (query, instruction) in enumerate(zip(queries, instructions)):
            match = fulltext.match_expression(query, instruction, settings.instruction_words)
            for chunk_id, score in fulltext.lexical_search(db, match, len(documents)):
                scores[row, chunk_id - 1] = score
        return scores
    finally:
        db.close()


def _bm25s_matrix(settings: HybridSettings, documents, queries, instructions) -> np.ndarray:
    bm25s = require("bm25s", "eval", "The BM25 baseline")

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(documents), stopwords="en", show_progress=False), show_progress=False)
    rows = []
    for query, instruction in zip(queries, instructions):
        words = fulltext.content_words(query)
        if settings.instruction_words == "content":
            words += fulltext.content_words(instruction, fulltext.STOPWORDS | fulltext.INSTRUCTION_WORDS)
        elif settings.instruction_words == "all":
            words += fulltext.content_words(instruction)
        tokens = bm25s.tokenize([" ".join(words) or "_"], stopwords="en", return_ids=False, show_progress=False)[0]
        rows.append(retriever.get_scores(tokens) if tokens else np.zeros(len(documents)))
    return np.stack(rows).astype(np.float64)


def fused_matrix(settings: HybridSettings, dense: np.ndarray, lexical: np.ndarray) -> np.ndarray:
    """Rank scores [queries, documents] of the fused ranking (higher is better, all finite)."""
    dense = np.asarray(dense, dtype=np.float64)
    count = dense.shape[1]
    scores = np.empty_like(dense)
    for row in range(dense.shape[0]):
        dense_order = np.argsort(-dense[row], kind="stable")
        if settings.mode == RERANK:
            first = _reranked(dense_order, lexical[row], settings.depth)
        else:
            first = fuse(dense[row], lexical[row], settings.mode, settings.weight, settings.depth).order
        fused = np.zeros(count, dtype=bool)
        fused[first] = True
        order = np.concatenate([first, dense_order[~fused[dense_order]]])
        scores[row, order] = count - np.arange(count)
    return scores


def _reranked(dense_order: np.ndarray, lexical: np.ndarray, depth: int) -> np.ndarray:
    """The lexical side's ``depth`` best (words matched) in dense order; none matched: dense order."""
    matched = np.flatnonzero(lexical > 0)
    if not len(matched):
        return dense_order
    kept = np.zeros(len(lexical), dtype=bool)
    kept[matched[np.argsort(-lexical[matched], kind="stable")[:depth]]] = True
    return dense_order[kept[dense_order]]


def hybrid_scores(settings: HybridSettings | None, dense: np.ndarray, documents, queries, instructions) -> np.ndarray:
    """The task's score matrix: ``dense`` itself without settings, else the fused rank scores."""
    if settings is None:
        return dense
    return fused_matrix(settings, dense, lexical_matrix(settings, documents, queries, instructions))
