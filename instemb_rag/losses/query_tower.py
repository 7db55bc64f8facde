"""The query tower's loss terms (training/query_tower/): queries ranked against cached document vectors."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def anchored_queries(anchors: torch.Tensor, corrections: torch.Tensor) -> torch.Tensor:
    """The shipped query embedding: the anchor plus the LLM's correction, L2-normalised [B, d]."""
    return F.normalize(anchors.float() + corrections.float(), dim=-1)


def bank_infonce(
    queries: torch.Tensor, candidates: torch.Tensor, positives: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Cross-entropy of each query [B, d] over the candidate passages [C, d] (all normalised):
    ``positives[b]`` is query b's passage among them; the rest are its negatives."""
    logits = queries @ candidates.float().T / temperature
    return F.cross_entropy(logits, positives)


def correction_norm(corrections: torch.Tensor) -> torch.Tensor:
    """Mean squared norm of the corrections: how far the queries moved from their anchors."""
    return corrections.float().pow(2).sum(dim=-1).mean()
