"""Evaluation metrics. Standard IR metrics come from ranx; p-MRR follows FollowIR exactly.

p-MRR (Weller et al., 2024, "FollowIR"): for a document that is relevant under the original
instruction and no longer relevant under the altered one, with 1-based ranks R_og and R_new,

    p = (1/R_og) / (1/R_new) - 1 = R_new / R_og - 1   if R_og >= R_new  (rose or stayed: p <= 0)
    p = 1 - (1/R_new) / (1/R_og) = 1 - R_og / R_new   if R_og <  R_new  (fell, as it should: p > 0)

so p lies in (-1, 1): +1 means the instruction change pushed the document far down, -1 far up.
Scores are averaged per query, then over queries (FollowIR's macro average).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..extras import require

DEFAULT_RETRIEVAL_METRICS = ("ndcg@10", "map@10", "mrr@10", "recall@10", "recall@100")


def retrieval_metrics(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str] = DEFAULT_RETRIEVAL_METRICS,
) -> dict[str, float]:
    """nDCG@k, MAP@k, MRR@k, recall@k (any ranx metric name) averaged over the run's queries."""
    ranx = require("ranx", "eval", "IR metrics (nDCG, MAP, MRR, recall)")
    Qrels, Run, evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    if not run:
        raise ValueError("The run holds no queries; nothing to evaluate.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's uint64->int64 cast warning inside ranx
        scores = evaluate(
            Qrels({qid: dict(docs) for qid, docs in qrels.items() if qid in run}),
            Run({qid: dict(docs) for qid, docs in run.items()}),
            list(metrics),
            make_comparable=True,
        )
    if isinstance(scores, float | np.floating):  # ranx returns a bare number for one metric
        scores = {metrics[0]: scores}
    return {name: float(value) for name, value in scores.items()}


def retrieval_metrics_per_query(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Sequence[str] = DEFAULT_RETRIEVAL_METRICS,
) -> dict[str, list[float]]:
    """The same metrics per query (ranx's order of the run's queries), for bootstrap intervals."""
    ranx = require("ranx", "eval", "IR metrics (nDCG, MAP, MRR, recall)")
    Qrels, Run, evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores = evaluate(
            Qrels({qid: dict(docs) for qid, docs in qrels.items() if qid in run}),
            Run({qid: dict(docs) for qid, docs in run.items()}),
            list(metrics),
            return_mean=False,
            make_comparable=True,
        )
    if not isinstance(scores, dict):
        scores = {metrics[0]: scores}
    return {name: [float(v) for v in values] for name, values in scores.items()}


def pairwise_rank_score(original_rank: int, new_rank: int) -> float:
    """FollowIR's per-document p-MRR term (ranks are 1-based)."""
    if original_rank < 1 or new_rank < 1:
        raise ValueError(f"Ranks are 1-based; got original_rank={original_rank}, new_rank={new_rank}.")
    if original_rank >= new_rank:
        return (1 / original_rank) / (1 / new_rank) - 1
    return 1 - (1 / new_rank) / (1 / original_rank)


def rank_of(scores: np.ndarray, target_index: int) -> int:
    """1-based rank of one candidate in a score vector (ties count in its favour)."""
    return int(np.sum(scores > scores[target_index])) + 1


def p_mrr(changes: Iterable[tuple[str, int, int]]) -> float:
    """Macro-averaged p-MRR over (query id, original rank, new rank) of changed documents."""
    per_query: dict[str, list[float]] = defaultdict(list)
    for query_id, original_rank, new_rank in changes:
        per_query[query_id].append(pairwise_rank_score(original_rank, new_rank))
    if not per_query:
        raise ValueError("p-MRR needs at least one changed document.")
    return float(np.mean([np.mean(values) for values in per_query.values()]))


def pairwise_accuracy(preferred: Sequence[float], other: Sequence[float]) -> float:
    """Share of pairs where the preferred score is strictly higher (ties count as failures)."""
    preferred, other = np.asarray(preferred, dtype=float), np.asarray(other, dtype=float)
    if preferred.shape != other.shape or preferred.size == 0:
        raise ValueError(f"Need two equal, non-empty score lists; got {preferred.shape} and {other.shape}.")
    return float(np.mean(preferred > other))


def spearman(predicted: Sequence[float], gold: Sequence[float]) -> float:
    spearmanr = require("scipy.stats", "eval", "Spearman's rho").spearmanr

    return float(spearmanr(predicted, gold).statistic)
