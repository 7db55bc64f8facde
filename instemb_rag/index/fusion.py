"""Hybrid ranking: the instructed dense scores and the full-text (bm25) scores fused into one.

``fuse`` takes, for a set of candidate chunks, each one's exact dense score (cosine of the
instructed query) and exact lexical score (FTS5 bm25, negated; 0 = no query word in it), and
ranks them by one of two rules:

- ``rrf`` (reciprocal rank fusion): ``(1 - w) / (60 + dense rank) + w / (60 + lexical rank)``,
  each term counted only when that side ranks the chunk within its ``depth`` best; scale-free,
  so a side's score distribution does not matter;
- ``z``: ``(1 - w) * z(dense) + w * z(lexical)``, each side standardised over the candidates.

``w`` is the lexical side's weight (``hybrid_weight``, 0..1). Ranks are 1-based over the
candidates; a side's rank of a chunk is None beyond its ``depth`` (or, lexically, when no word
matched). The candidates must hold each side's ``depth`` best: ``Index.search`` passes the union
of the store's and the full-text index's top ``depth``; the evaluation passes every document, so
both rank exactly as a search does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CANDIDATE_DEPTH",
    "DEFAULT_MODE",
    "DEFAULT_WEIGHT",
    "HYBRID_MODES",
    "RRF_K",
    "FusedRanking",
    "check_hybrid",
    "fuse",
]

HYBRID_MODES = ("rrf", "z")
DEFAULT_MODE = "z"  # a bare --hybrid: z led rrf on Vaswani and on most of the sets (docs/hybrid_report.md)
RRF_K = 60  # the constant of Cormack et al. (2009): damps the head of each list
CANDIDATE_DEPTH = 100  # chunks each side contributes (at least k)
DEFAULT_WEIGHT = 0.5  # lexical share when --hybrid-weight is not given (docs/hybrid_report.md)


@dataclass
class FusedRanking:
    """Candidates in fused order: positions into the arrays given to ``fuse``, their fused
    scores, and each side's 1-based rank (None: outside that side's depth)."""

    order: np.ndarray
    scores: np.ndarray
    dense_ranks: list[int | None]
    lexical_ranks: list[int | None]


def check_hybrid(mode: str | None, weight: float | None) -> tuple[str | None, float]:
    """(mode, weight) checked: mode None (dense only), 'rrf' or 'z'; weight within [0, 1]."""
    from .errors import BadInputError

    mode = getattr(mode, "value", mode)  # HybridMode or its string
    if mode is not None and mode not in HYBRID_MODES:
        raise BadInputError(f"hybrid={mode!r} is not a fusion rule: use one of {', '.join(HYBRID_MODES)}.")
    if weight is not None and mode is None:
        raise BadInputError("A hybrid weight needs hybrid search: add --hybrid (or hybrid='rrf').")
    weight = DEFAULT_WEIGHT if weight is None else float(weight)
    if not 0.0 <= weight <= 1.0:
        raise BadInputError(f"hybrid weight {weight} is outside 0..1: it is the lexical side's share (0 = dense only).")
    return mode, weight


def side_ranks(scores: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """1-based rank of each entry by descending score among the valid ones (0 for invalid);
    ties broken by position, so ranks are a permutation."""
    order = np.argsort(-np.where(valid, scores, -np.inf), kind="stable")
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(scores) + 1)
    return np.where(valid, ranks, 0)


def fuse(
    dense: np.ndarray, lexical: np.ndarray, mode: str, weight: float, depth: int = CANDIDATE_DEPTH
) -> FusedRanking:
    """Fuse the two sides' exact scores over the same candidates (see the module's docstring)."""
    dense = np.asarray(dense, dtype=np.float64)
    lexical = np.asarray(lexical, dtype=np.float64)
    dense_rank = side_ranks(dense, np.ones(len(dense), dtype=bool))
    lexical_rank = side_ranks(lexical, lexical > 0)
    in_dense = (dense_rank >= 1) & (dense_rank <= depth)
    in_lexical = (lexical_rank >= 1) & (lexical_rank <= depth)
    candidates = np.flatnonzero(in_dense | in_lexical)
    if mode == "rrf":
        fused = np.where(in_dense, (1 - weight) / (RRF_K + dense_rank), 0.0)
        fused = fused + np.where(in_lexical, weight / (RRF_K + lexical_rank), 0.0)
    elif mode == "z":
        fused = (1 - weight) * _standardised(dense, candidates) + weight * _standardised(lexical, candidates)
    else:
        raise ValueError(f"unknown fusion rule {mode!r}")
    # fused score first, the dense score breaks ties (lexical-only zeros, equal rank sums)
    order = candidates[np.lexsort((-dense[candidates], -fused[candidates]))]
    return FusedRanking(
        order=order,
        scores=fused[order],
        dense_ranks=[int(r) if in_dense[i] else None for i, r in zip(order, dense_rank[order])],
        lexical_ranks=[int(r) if in_lexical[i] else None for i, r in zip(order, lexical_rank[order])],
    )


def _standardised(values: np.ndarray, over: np.ndarray) -> np.ndarray:
    """(values - mean) / std, both taken over the ``over`` positions (0 where they all agree)."""
    if not len(over):
        return np.zeros_like(values)
    spread = float(np.std(values[over]))
    return (values - float(np.mean(values[over]))) / spread if spread > 0 else np.zeros_like(values)
