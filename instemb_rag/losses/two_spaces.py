"""The two-space objective's loss (training/two_spaces/): queries ranked by a per-query weight of two
spaces, the score a two-space index ranks by (encoder/combine.py ``two_spaces_scores``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..encoder.combine import two_spaces_scores


def two_spaces_infonce(
    llm, sentence_encoder, weights: torch.Tensor, positives: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Cross-entropy of each query over the candidates by its two-space score: ``positives[b]`` is
    query b's passage among them, the rest its negatives (hard ones and a bank sample)."""
    return F.cross_entropy(two_spaces_scores(llm, sentence_encoder, weights) / temperature, positives)
