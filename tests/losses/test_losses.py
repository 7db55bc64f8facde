"""Loss values against hand computation on tiny tensors (paper eqs. 1-3)."""

import math

import pytest
import torch

from instemb_rag.losses import kl_distillation_loss, mse_distillation_loss, multiview_supcon_loss


def test_mse_is_mean_squared_norm_over_valid_positions():
    student = torch.tensor([[[1.0, 2.0], [9.0, 9.0]], [[0.0, 1.0], [3.0, 0.0]]])
    teacher = torch.zeros(2, 2, 2)
    mask = torch.tensor([[True, False], [True, True]])
    # valid squared norms: 5, 1, 9 -> mean 5; position (0, 1) is masked out
    assert mse_distillation_loss(student, teacher, mask, normalize_by_dim=False).item() == pytest.approx(5.0)
    assert mse_distillation_loss(student, teacher, mask, normalize_by_dim=True).item() == pytest.approx(2.5)


def test_mse_with_no_valid_position_is_zero_and_differentiable():
    student = torch.ones(1, 2, 3, requires_grad=True)
    loss = mse_distillation_loss(student, torch.zeros(1, 2, 3), torch.zeros(1, 2, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0 and student.grad is not None


def test_kl_is_student_to_teacher_as_in_eq2_and_masks_short_answers():
    student = torch.tensor([[[0.0, 0.0], [5.0, -5.0]]])  # P_S = (1/2, 1/2) at the valid position
    teacher = torch.log(torch.tensor([[[1.0, 3.0], [1.0, 1.0]]]))  # P_T = (1/4, 3/4)
    mask = torch.tensor([[True, False]])
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)  # KL(P_S || P_T)
    reverse = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)  # KL(P_T || P_S), not eq. 2
    value = kl_distillation_loss(student, teacher, mask).item()
    assert value == pytest.approx(expected, abs=1e-6)
    assert value != pytest.approx(reverse, abs=1e-4)


def test_supcon_two_instances_two_views_by_hand():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.6, 0.8])  # instance 0
    c, d = torch.tensor([0.0, 2.0]), torch.tensor([-1.0, 0.0])  # instance 1 (c is not unit length)
    tau = 0.5
    unit = [a, b, c / 2, d]
    sim = [[float(u @ v) for v in unit] for u in unit]
    owner = [0, 0, 1, 1]
    per_anchor = []
    for i in range(4):
        positives = sum(math.exp(sim[i][j] / tau) for j in range(4) if j != i and owner[j] == owner[i])
        everyone = sum(math.exp(sim[i][j] / tau) for j in range(4) if j != i)
        per_anchor.append(-math.log(positives / everyone))
    expected = sum(per_anchor) / 4
    views = torch.stack([torch.stack([a, b]), torch.stack([c, d])])  # [N=2, V=2, d=2]
    assert multiview_supcon_loss(views, temperature=tau).item() == pytest.approx(expected, abs=1e-6)


def test_supcon_hard_negatives_join_every_denominator_by_hand():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.6, 0.8])
    c, d = torch.tensor([0.0, 1.0]), torch.tensor([-1.0, 0.0])
    negative = torch.tensor([0.8, 0.6])
    tau = 0.5
    unit = [a, b, c, d]
    owner = [0, 0, 1, 1]
    per_anchor = []
    for i in range(4):
        sim = [float(unit[i] @ v) for v in unit]
        positives = sum(math.exp(sim[j] / tau) for j in range(4) if j != i and owner[j] == owner[i])
        everyone = sum(math.exp(sim[j] / tau) for j in range(4) if j != i) + math.exp(float(unit[i] @ negative) / tau)
        per_anchor.append(-math.log(positives / everyone))
    views = torch.stack([torch.stack([a, b]), torch.stack([c, d])])
    value = multiview_supcon_loss(views, temperature=tau, negatives=negative[None] * 3).item()  # scale is ignored
    assert value == pytest.approx(sum(per_anchor) / 4, abs=1e-6)
    assert value > multiview_supcon_loss(views, temperature=tau).item()
    # An empty set of negatives is the plain loss.
    assert multiview_supcon_loss(views, tau, torch.zeros(0, 2)).item() == pytest.approx(
        multiview_supcon_loss(views, tau).item()
    )


def test_supcon_prefers_aligned_views():
    aligned = torch.tensor([[[1.0, 0.0], [1.0, 0.1]], [[0.0, 1.0], [0.1, 1.0]]])
    crossed = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.1, 1.0], [1.0, 0.1]]])
    assert multiview_supcon_loss(aligned).item() < multiview_supcon_loss(crossed).item()


def test_supcon_rejects_a_single_view():
    with pytest.raises(ValueError, match="V>=2"):
        multiview_supcon_loss(torch.zeros(3, 1, 4))
    with pytest.raises(ValueError, match="negatives must be"):
        multiview_supcon_loss(torch.zeros(3, 2, 4), negatives=torch.zeros(2, 5))
