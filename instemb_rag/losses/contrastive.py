"""Multi-view supervised contrastive loss (paper, eq. 3; Khosla et al., 2020).

Each instance contributes V views (student input under two dropout masks, teacher input,
student output). For an anchor view z of instance i the positives are the other views of
i and the candidates are every other embedding of the batch:

    loss_z = -log( sum_{z+ in P_i \\ z} exp(sim(z, z+)/tau) / sum_{z' in A \\ z} exp(sim(z, z')/tau) )

Eq. 3 sums the positives inside the log (the "L_in" form), so it is implemented that way.
The loss averages over the views of an instance, then over instances.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def multiview_supcon_loss(
    views: torch.Tensor,
    temperature: float = 0.1,
    negatives: torch.Tensor | None = None,
    shared: torch.Tensor | None = None,
) -> torch.Tensor:
    """views: [N, V, d] embeddings (V >= 2 views of N instances); sim is cosine similarity.

    negatives: optional [M, d] hard negatives (for example a record's text under an instruction
    its output does not answer). They join every anchor's denominator and are never anchors or
    positives themselves, so they only push the views away from them.

    shared: optional [N, N] bool, True where instances i and j have the same target (identical
    outputs such as "Yes.", or the same query): j's views are then left out of i's denominator
    instead of being counted as negatives of it."""
    if views.dim() != 3 or views.shape[1] < 2:
        raise ValueError(f"views must be [N, V>=2, d]; got shape {tuple(views.shape)}")
    count, per_instance, dim = views.shape
    flat = F.normalize(views.float().reshape(count * per_instance, -1), dim=-1)
    extra = views.new_zeros(0, dim) if negatives is None else negatives
    if extra.dim() != 2 or extra.shape[1] != dim:
        raise ValueError(f"negatives must be [M, {dim}]; got shape {tuple(extra.shape)}")
    candidates = torch.cat([flat, F.normalize(extra.float(), dim=-1)])
    logits = flat @ candidates.T / temperature  # [N*V, N*V + M]
    owner = torch.arange(count, device=views.device).repeat_interleave(per_instance)
    no_owner = torch.full((len(extra),), -1, device=views.device)
    candidate_owner = torch.cat([owner, no_owner])
    itself = F.pad(torch.eye(len(owner), dtype=torch.bool, device=views.device), (0, len(extra)))
    positive = (owner[:, None] == candidate_owner[None, :]) & ~itself
    excluded = torch.finfo(logits.dtype).min
    log_positive = torch.logsumexp(logits.masked_fill(~positive, excluded), dim=1)
    not_negative = itself
    if shared is not None:
        if shared.shape != (count, count):
            raise ValueError(f"shared must be [{count}, {count}]; got shape {tuple(shared.shape)}")
        same_target = F.pad(shared[owner][:, owner], (0, len(extra))) & ~positive & ~itself
        not_negative = itself | same_target
    log_all = torch.logsumexp(logits.masked_fill(not_negative, excluded), dim=1)
    per_anchor = log_all - log_positive  # [N*V]
    # Every instance has V views, so the per-instance mean then batch mean is a plain mean.
    return per_anchor.mean()
