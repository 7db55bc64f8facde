"""The effect objective's loss (training/effect/): queries ranked by the plain score plus the
instruction's effect, the score an instruction-effect index ranks by (encoder/composed/effect.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def effect_scores(
    effect_half: torch.Tensor, tower_queries: torch.Tensor, llm_candidates: torch.Tensor, tower_candidates: torch.Tensor
) -> torch.Tensor:
    """[B, C] ``cos_M(i + q, d) + < s h(effect), D(d) >``: ``effect_half`` [B, d_llm] is each
    query's ``s h(effect)``, ``tower_queries`` [B, d_m] its normalised M(i + q); candidates [C, .]
    are normalised document halves."""
    return tower_queries.float() @ tower_candidates.float().T + effect_half.float() @ llm_candidates.float().T


def effect_infonce(scores: torch.Tensor, positives: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy of each query over its candidates: ``positives[b]`` is query b's passage among
    them, the rest its negatives (its group's other passages and a bank sample)."""
    return F.cross_entropy(scores / temperature, positives)
