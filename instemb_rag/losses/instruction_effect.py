"""The effect objective's loss (training/effect/): queries ranked by the plain score plus the
instruction's effect, the score an instruction-effect index ranks by (encoder/combine.py
``effect_scores``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def effect_infonce(scores: torch.Tensor, positives: torch.Tensor, temperature: float) -> torch.Tensor:
    """Cross-entropy of each query over its candidates: ``positives[b]`` is query b's passage among
    them, the rest its negatives (its group's other passages and a bank sample)."""
    return F.cross_entropy(scores / temperature, positives)
