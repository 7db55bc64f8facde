"""The two-tower recipe's loss terms (training/two_tower/: the query LLM): queries ranked against
cached document vectors.

The queries themselves come from the encoder's own query route (encoder/combine.py ``anchored``:
the anchor plus the LLM's correction, normalised), as at inference."""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
