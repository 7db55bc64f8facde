"""The training objective of one micro-batch: distillation + multi-view contrastive + pooled retrieval.

``compute_losses`` runs the student's passes (student.py) and returns every weighted term; the
loss functions themselves are in ``instemb_rag/losses/``. Under data parallelism the terms are
the single-process ones (parallel.py gathers the views and shares the distillation mean).
"""

from __future__ import annotations

import torch

from ...datasets.records import TrainingRecord, source_set
from ...losses import (
    instruction_retrieval_loss,
    kl_distillation_loss,
    mse_distillation_loss,
    multiview_supcon_loss,
)
from ..common_args import RunConfig
from ..objective import weighted_sum
from ..parallel import DistributedEnv, MicroBatchShard, sum_over_ranks
from ..student import FullStudent, StudentPass, StudentRunner, needs_output_pass
from .frozen_llm import LlmTargets
from .negative_memory import NegativeMemory

__all__ = [
    "RANK_SHARED_TERMS",
    "compute_losses",
    "distilled_positions",
    "reported_terms",
    "shared_targets",
    "term_weights",
]


def term_weights(config: RunConfig) -> dict[str, float]:
    """The look-ahead recipe's terms and their weights: the one place they are named."""
    t = config.training
    return {"distill": t.distill_weight, "contrastive": t.contrastive_weight, "retrieval": t.retrieval_weight}


def shared_targets(records: list[TrainingRecord], device) -> torch.Tensor:
    """[N, N] True where two records have the same output or the same query: not negatives."""
    outputs = [" ".join(r.output.split()).lower() for r in records]
    queries = [(r.text, r.instruction) for r in records]
    same = [
        [outputs[i] == outputs[j] or queries[i] == queries[j] for j in range(len(records))] for i in range(len(records))
    ]
    return torch.tensor(same, dtype=torch.bool, device=device)


def _contrastive_term(
    student: StudentRunner,
    records,
    query_pass: StudentPass,
    output_pass: StudentPass | None,
    targets: LlmTargets,
    shared: torch.Tensor,
    config: RunConfig,
    shard: MicroBatchShard,
) -> torch.Tensor:
    """The paper's multi-view SupCon (eq. 3) over the chosen views, at the last input token,
    over the whole micro-batch (the views of every rank's slice, gathered)."""
    t = config.training
    views = []
    for view in t.views:
        if view == "student_input":
            views.append(query_pass.at_input_last())
        elif view == "student_input_dropout":
            views.append(student.input_last_with_dropout(records, t.view_dropout))
        elif view == "teacher_input":
            views.append(targets.anchor)
        elif view == "student_output":
            views.append(output_pass.at_input_last())
    local_views = torch.stack([v.float() for v in views], dim=1)
    return multiview_supcon_loss(shard.gather(local_views), t.temperature, shared=shared)


def _retrieval_term(
    encoder,
    student: StudentRunner,
    records,
    query_pass: StudentPass,
    output_pass: StudentPass,
    shared: torch.Tensor,
    config: RunConfig,
    shard: MicroBatchShard,
    memory: NegativeMemory | None = None,
) -> torch.Tensor:
    """Ranking on the pooled embeddings, with both kinds of hard negative (losses/retrieval.py)
    and, where kept, the memory of earlier documents; this micro-batch's documents join it after."""
    flipped = [(r.text, r.negative_instruction) for r in records if r.negative_instruction]
    extra_outputs = [(text, None) for r in records for text in r.negative_outputs]

    def pooled(pairs):
        return student.forward(pairs).pooled(encoder)

    stand_in = [(records[0].text, None)]
    negative_queries = shard.rows_of_pass(
        pooled, flipped, any(r.negative_instruction for r in shard.batch_records), stand_in
    )
    negative_outputs = shard.rows_of_pass(
        pooled, extra_outputs, any(r.negative_outputs for r in shard.batch_records), stand_in
    )
    documents = shard.gather(output_pass.pooled(encoder))
    device = documents.device
    remembered = memory.negatives(device) if memory is not None else None
    loss = instruction_retrieval_loss(
        shard.gather(query_pass.pooled(encoder)),
        documents,
        shared,
        config.training.retrieval_temperature,
        negative_outputs,
        negative_queries,
        remembered,
        memory.excluded(shard.batch_records, device) if remembered is not None else None,
    )
    if memory is not None:
        memory.push(documents, shard.batch_records)  # every rank gathered the same rows
    return loss


def distilled_positions(
    records: list[TrainingRecord], mask: torch.Tensor, distill_sets: list[str] | None
) -> torch.Tensor:
    """The look-ahead positions [B, L] the distillation term reads: every valid one, or with
    ``distill_sets`` only those of records built from these sets (a micro-batch with none of them
    gives a zero term)."""
    if distill_sets is None:
        return mask
    chosen = torch.tensor([source_set(record) in distill_sets for record in records], device=mask.device)
    return mask & chosen[:, None]


def compute_losses(
    encoder,
    records: list[TrainingRecord],
    targets: LlmTargets | None,
    config: RunConfig,
    shard: MicroBatchShard | None = None,
    memory: NegativeMemory | None = None,
    student: StudentRunner | None = None,
) -> dict:
    """Distillation + multi-view contrastive + pooled retrieval loss of one micro-batch; returns the terms.

    Under data parallelism ``records`` are this rank's slice of ``shard.batch_records``: the
    contrastive and retrieval terms are the micro-batch's (gathered views), the distillation
    term is this rank's share of the micro-batch mean (parallel.py). ``student`` runs the
    student's passes: the whole model (default), or the top layers on cached prefix states."""
    t = config.training
    weights = term_weights(config)
    shard = shard or MicroBatchShard.whole(records)
    student = student or FullStudent(encoder)
    query_pass = student.forward([(r.text, r.instruction) for r in records])
    rows = torch.arange(query_pass.hidden.shape[0], device=query_pass.hidden.device)
    student_lookahead = query_pass.hidden[rows[:, None], query_pass.lookahead_idx]  # [B, L, d]
    # Outputs are embedded as documents are at search time: no instruction, look-ahead slots. A
    # causal model's state at their last token does not see the slots, so the same pass gives
    # the SupCon output view (InputLast of y) and the pooled document embedding.
    output_pass = student.forward([(r.output, None) for r in records]) if needs_output_pass(config) else None
    shared = shared_targets(shard.batch_records, query_pass.hidden.device)
    terms: dict[str, torch.Tensor] = {}
    if weights["distill"] > 0:
        mask = distilled_positions(records, targets.mask, t.distill_sets)
        if t.distill_loss == "kl":
            head = encoder.model.get_output_embeddings()
            with torch.no_grad():
                teacher_logits = head(targets.lookahead.to(student_lookahead.dtype))
            distill = kl_distillation_loss(head(student_lookahead), teacher_logits, mask, t.kl_temperature)
        else:
            distill = mse_distillation_loss(student_lookahead, targets.lookahead, mask, t.mse_normalize_by_dim)
        terms["distill"] = shard.global_mean(distill, mask.sum())
    if weights["contrastive"] > 0:
        terms["contrastive"] = _contrastive_term(
            student, records, query_pass, output_pass, targets, shared, config, shard
        )
    if weights["retrieval"] > 0:
        terms["retrieval"] = _retrieval_term(
            encoder, student, records, query_pass, output_pass, shared, config, shard, memory
        )
    total = weighted_sum(terms, weights, torch.zeros((), device=query_pass.hidden.device))
    return {"loss": total, **terms}


# Terms whose per-rank values are shares of the micro-batch's value (summed over ranks to report it);
# the others are computed from gathered tensors and are the same on every rank.
RANK_SHARED_TERMS = ("distill",)


def reported_terms(terms: dict, config: RunConfig, env: DistributedEnv, device) -> dict[str, float]:
    """The micro-batch's loss terms as one process would compute them."""
    reported = {
        name: (sum_over_ranks(value.detach(), env, device) if name in RANK_SHARED_TERMS else float(value.detach()))
        for name, value in terms.items()
        if name != "loss"
    }
    if env.enabled:
        loss = weighted_sum(reported, term_weights(config))
    else:
        loss = float(terms["loss"].detach())
    return {"loss": loss, **reported}
