"""Position-wise distillation at the L look-ahead positions (paper, eqs. 1 and 2).

The student reads ``[x; s_1..s_L]``, the frozen teacher read ``[x; y_1..y_L]``; position
``|x|+i`` of one is aligned with position ``|x|+i`` of the other. Answers shorter than L
leave teacher positions without a target: ``mask`` is False there and those positions are
left out of both the sum and the count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _masked_mean(per_position: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over valid positions of the whole batch; 0 (still differentiable) when none is valid."""
    weights = mask.to(per_position.dtype)
    return (per_position * weights).sum() / weights.sum().clamp(min=1.0)


def mse_distillation_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    mask: torch.Tensor,
    normalize_by_dim: bool = True,
) -> torch.Tensor:
    """Eq. 1: mean over valid look-ahead positions of ||h_S - h_T||_2^2.

    student, teacher: [B, L, d]; mask: [B, L] bool. With ``normalize_by_dim`` the squared
    norm is divided by d (a per-coordinate MSE). Final-layer states of a small LLM have norms
    in the tens to hundreds, so the raw eq. 1 value can be 10^3 times the contrastive loss
    and drown it; dividing by d keeps both terms on comparable scales without changing the
    minimiser. Set it to False to reproduce eq. 1 literally.
    """
    squared = (student.float() - teacher.float()).pow(2).sum(dim=-1)  # [B, L]
    if normalize_by_dim:
        squared = squared / student.shape[-1]
    return _masked_mean(squared, mask)


def kl_distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    mask: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Eq. 2 as written in the paper: KL(P_S || P_T) = sum_v P_S(v) log(P_S(v) / P_T(v)).

    This is the reverse (mode-seeking) KL; logits: [B, L, V]; mask: [B, L] bool.
    """
    log_student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    per_position = (log_student.exp() * (log_student - log_teacher)).sum(dim=-1)  # [B, L]
    return _masked_mean(per_position, mask)
