"""Metrics against values worked out by hand on tiny rankings."""

import math

import numpy as np
import pytest

from instemb_rag.eval import metrics


def test_retrieval_metrics_match_hand_computed_values():
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d2": 1}}
    run = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.7}, "q2": {"d1": 0.9, "d2": 0.5, "d3": 0.1}}
    scores = metrics.retrieval_metrics(qrels, run, ["ndcg@10", "map@10", "mrr@10", "recall@1", "recall@2"])
    # q1: relevant at ranks 1 and 3; q2: relevant at rank 2.
    ndcg_q1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg_q2 = (1 / math.log2(3)) / 1
    assert scores["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2) / 2)
    assert scores["map@10"] == pytest.approx(((1 + 2 / 3) / 2 + 1 / 2) / 2)
    assert scores["mrr@10"] == pytest.approx((1 + 1 / 2) / 2)
    assert scores["recall@1"] == pytest.approx((1 / 2 + 0) / 2)
    assert scores["recall@2"] == pytest.approx((1 / 2 + 1) / 2)


def test_cutoff_excludes_documents_below_k():
    qrels = {"q": {"late": 1}}
    run = {"q": {f"d{i}": 1.0 - i / 100 for i in range(12)} | {"late": 0.0}}
    scores = metrics.retrieval_metrics(qrels, run, ["ndcg@10", "mrr@10", "recall@10"])
    assert scores == {"ndcg@10": 0.0, "mrr@10": 0.0, "recall@10": 0.0}


@pytest.mark.parametrize(
    "original, new, expected",
    [
        (1, 1, 0.0),  # unchanged rank: no credit
        (1, 2, 0.5),  # fell from 1 to 2 under the altered instruction: 1 - 1/2
        (2, 1, -0.5),  # rose from 2 to 1: 2/... = (1/2)/(1/1) - 1
        (3, 12, 0.75),  # 1 - 3/12
        (12, 3, -0.75),  # (1/12)/(1/3) - 1
    ],
)
def test_pairwise_rank_score_follows_followir(original, new, expected):
    assert metrics.pairwise_rank_score(original, new) == pytest.approx(expected)


def test_p_mrr_sign_and_range_on_constructed_cases():
    ranks = range(1, 60, 7)
    values = [metrics.pairwise_rank_score(a, b) for a in ranks for b in ranks]
    assert all(-1 < value < 1 for value in values)
    assert metrics.p_mrr([("q", 1, 1000)]) > 0.99  # pushed far down: near +1
    assert metrics.p_mrr([("q", 1000, 1)]) < -0.99  # pulled far up: near -1
    assert metrics.p_mrr([("q", 5, 5)]) == 0.0


def test_p_mrr_averages_per_query_then_over_queries():
    changes = [("q1", 1, 2), ("q1", 1, 4), ("q2", 2, 1)]
    # q1: mean(0.5, 0.75) = 0.625; q2: -0.5; macro mean = 0.0625 (a flat mean would be 0.25).
    assert metrics.p_mrr(changes) == pytest.approx(0.0625)


def test_p_mrr_rejects_bad_input():
    with pytest.raises(ValueError, match="1-based"):
        metrics.pairwise_rank_score(0, 3)
    with pytest.raises(ValueError, match="at least one"):
        metrics.p_mrr([])


def test_pairwise_accuracy_counts_ties_as_failures():
    assert metrics.pairwise_accuracy([0.9, 0.5, 0.3], [0.1, 0.5, 0.4]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        metrics.pairwise_accuracy([0.1], [0.1, 0.2])


def test_rank_of_is_one_based_and_counts_only_strictly_higher_scores():
    scores = np.array([0.2, 0.9, 0.5, 0.9])
    assert metrics.rank_of(scores, 1) == 1
    assert metrics.rank_of(scores, 2) == 3
    assert metrics.rank_of(scores, 0) == 4


def test_spearman_uses_ranks_not_values():
    assert metrics.spearman([1, 2, 3, 100], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(1.0)
    assert metrics.spearman([4, 3, 2, 1], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(-1.0)
