"""The two-space objective's loss (training/two_spaces/): queries ranked by a per-query mix of two spaces."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def mixed_scores(
    llm: tuple[torch.Tensor, torch.Tensor], tower: tuple[torch.Tensor, torch.Tensor], weights: torch.Tensor
) -> torch.Tensor:
    """[B, C] ``w * cos(a, A) + (1 - w) * cos(b, B)``: each pair is (queries [B, d], candidates [C, d]),
    all normalised; ``weights`` [B] is each query's LLM share. What a two-space index ranks by."""
    (llm_queries, llm_candidates), (tower_queries, tower_candidates) = llm, tower
    weights = weights.float()[:, None]
    llm_scores = llm_queries.float() @ llm_candidates.float().T
    tower_scores = tower_queries.float() @ tower_candidates.float().T
    return weights * llm_scores + (1.0 - weights) * tower_scores


def mixed_infonce(llm, tower, weights: torch.Tensor, positives: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy of each query over the candidates by its mixed score: ``positives[b]`` is
    query b's passage among them, the rest its negatives (hard ones and a bank sample)."""
    return F.cross_entropy(mixed_scores(llm, tower, weights) / temperature, positives)
