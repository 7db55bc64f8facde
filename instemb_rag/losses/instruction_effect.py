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


def flat_contribution(effect: torch.Tensor, llm_candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """The spread of the instruction's contribution ``< s h(effect), D(d) >`` across the candidates,
    in temperature units (mean squared deviation from each query's own mean): zero when the
    instruction moves no candidate against another. For instructions that should decide nothing
    (generic retrieval wordings); 0 for an empty batch."""
    if not len(effect):
        return effect.sum() * 0.0
    contribution = (effect.float() @ llm_candidates.float().T) / temperature
    return (contribution - contribution.mean(dim=1, keepdim=True)).pow(2).mean()
