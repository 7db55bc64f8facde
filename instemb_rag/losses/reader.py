"""The reader's objective: a listwise softmax over each record's candidates (issue 67).

Each record's candidates are its positive (index 0) and its negatives; the reader's logits over
them are one softmax, and the loss is the positive's negative log-probability, as cross-encoder
rerankers are trained on groups of hard negatives. A record's candidates are scored together, so
a trap only costs what it takes from its own positive.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

__all__ = ["listwise_reader_loss"]


def listwise_reader_loss(logits: torch.Tensor, group_sizes: Sequence[int]) -> torch.Tensor:
    """Mean over records of -log softmax(logits of the record)[0]; ``logits`` lists the records' candidates in order."""
    if sum(group_sizes) != logits.shape[0]:
        raise ValueError(f"{logits.shape[0]} logits for groups of {list(group_sizes)} candidates")
    losses = []
    for group in torch.split(logits.float(), list(group_sizes)):
        losses.append(-F.log_softmax(group, dim=0)[0])
    return torch.stack(losses).mean()
