"""Losses that distil a sentence encoder's geometry into the student's (projected) embeddings.

- ``dense_cosine``: per text, 1 - cosine between the student's embedding and the teacher's
  embedding of the same text (a query read with its instruction, a passage as it is).
- ``relational_kl``: the batch's similarity distributions (each row a softmax over the other
  texts) of student and teacher, KL in both directions: the student learns which texts the
  teacher finds close, not only where each one sits.
- ``group_infonce``: each query against every passage of the batch, its positive the target;
  a group's other passages (the same subject's other facets) are in the batch as hard
  negatives, so the labels can correct what the teacher gets wrong.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def dense_cosine(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    return (1 - F.cosine_similarity(student, teacher.to(student.dtype), dim=-1)).mean()


def _row_log_softmax(embeddings: torch.Tensor, temperature: float) -> torch.Tensor:
    unit = F.normalize(embeddings, dim=-1)
    logits = unit @ unit.T / temperature
    eye = torch.eye(logits.shape[0], dtype=torch.bool, device=logits.device)
    return logits.masked_fill(eye, float("-inf")).log_softmax(dim=-1).masked_fill(eye, 0.0)


def relational_kl(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric KL between student and teacher similarity rows (the diagonal left out)."""
    if student.shape[0] < 3:
        return student.sum() * 0.0  # one other text per row: the distribution is fixed
    log_s = _row_log_softmax(student, temperature)
    log_t = _row_log_softmax(teacher.to(student.dtype), temperature)
    forward = (log_t.exp() * (log_t - log_s)).sum(dim=-1)
    backward = (log_s.exp() * (log_s - log_t)).sum(dim=-1)
    return 0.5 * (forward + backward).mean()


def group_infonce(
    queries: torch.Tensor, passages: torch.Tensor, positives: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Cross-entropy of each query over the batch's passages; ``positives`` [Q] index ``passages``."""
    if queries.shape[0] == 0:
        return queries.sum() * 0.0
    logits = F.normalize(queries, dim=-1) @ F.normalize(passages, dim=-1).T / temperature
    return F.cross_entropy(logits, positives)
