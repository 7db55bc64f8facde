"""The look-ahead objective (``LookaheadObjective``), plugged into the one trainer loop (trainer.py).

One optimizer step = ``gradient_accumulation_steps`` micro-batches of ``batch_size`` records.
Per micro-batch the student runs:

    1. ``[x; s]``                 look-ahead states (distillation) and the |x| state (view 1)
    2. ``x`` with embedding dropout  view 2 (Llama has no dropout layers, so the SimCSE-style
                                   second mask is dropout on the input embeddings); the
                                   look-ahead slots are left out because a causal model's
                                   |x| state cannot see them
    3. ``y`` as input text        view 4 (InputLast of the answer)

View 3 and the distillation targets come from the frozen LLM (frozen_llm.py, cached).
With ``model.frozen_prefix`` these passes run only the top K layers on cached states of the
frozen layers below (cached_student.py; view 2's dropout then acts on those states).

Each concern has its module: the records (instemb_rag/datasets/, train_file.py) and their order
(../batch_order.py), the student's set-up and passes (../student.py), the frozen LLM's targets
(frozen_llm.py), the losses (losses.py), the run's files (../run_files.py) and data parallelism
(../parallel.py).
"""

from __future__ import annotations

import torch

from ...choices import ParallelMode
from ...datasets.records import open_records
from .. import parallel
from ..batch_order import BatchOrder, record_lengths
from ..common_args import RunConfig
from ..cpu_threads import set_training_threads
from ..objective import Objective, Prepared, StepResult
from ..parallel import SINGLE_PROCESS, DistributedEnv, MicroBatchShard, local_indices, sum_over_ranks
from ..student import (
    StudentRunner,
    build_optimizer,
    decoder_layers,
    enable_gradient_checkpointing,
    load_student,
    make_trainable,
    refuse_sharded_adapted_tensors,
)
from .cached_student import prepare_student
from .frozen_llm import autocast_for, compute_llm_targets, file_digest, prepare_frozen_llm
from .losses import compute_losses, reported_terms, term_weights
from .negative_memory import NegativeMemory
from .train_file import check_distill_sets_are_present, check_hard_negatives_have_a_loss, resolve_train_file

__all__ = ["LookaheadObjective", "run_step"]


class LookaheadObjective(Objective):
    name = "lookahead"
    data_parallel = True

    @staticmethod
    def term_weights(config: RunConfig) -> dict[str, float]:
        return term_weights(config)

    def prepare(self) -> Prepared:
        config, env, device = self.config, self.env, self.device
        t = config.training
        parallel.check_batch_fits(t.batch_size, env)
        if env.is_main:  # only rank 0 builds the records; the others read them once it is done
            resolve_train_file(config)
        parallel.barrier(env)
        train_file = resolve_train_file(config)
        records = open_records(train_file)  # streamed: validated in one pass, read again by index
        check_hard_negatives_have_a_loss(records, config, train_file)
        check_distill_sets_are_present(records, config, train_file)
        lengths = record_lengths(records) if t.bucket_by_length else None
        order = BatchOrder.records(records.groups, t.batch_size, t.gradient_accumulation_steps, t.seed, lengths)
        encoder = load_student(config, device)
        run_info: dict = {"device": str(device), "records": len(records), "world_size": env.world_size}
        run_info["torch_threads"] = set_training_threads(device.type) or torch.get_num_threads()
        cache, teacher = prepare_frozen_llm(config, encoder, records, order, run_info, env)

        parts = make_trainable(encoder, config)
        if t.gradient_checkpointing:
            enable_gradient_checkpointing(encoder)
        student = prepare_student(config, encoder, records, order, run_info, env)  # None: full passes
        if t.parallel == ParallelMode.fsdp.value:
            run_info["fsdp_sharded_parameters"] = parallel.shard_frozen_weights(
                encoder.model, decoder_layers(encoder.model), env, device, t.bf16
            )
            refuse_sharded_adapted_tensors(encoder, parts)
        optimizer, scheduler = build_optimizer(encoder, parts, config)
        data_info = {
            "train_file": str(train_file),
            "data_sha256": file_digest(train_file),
            "records": len(records),
            "seed": t.seed,
            "examples_per_step": t.batch_size * t.gradient_accumulation_steps,
        }
        memory = NegativeMemory(t.negative_memory, encoder.dimension) if t.negative_memory else None
        self.encoder, self.records, self.order, self.cache, self.teacher = encoder, records, order, cache, teacher
        self.memory, self.student = memory, student
        encoder.train()
        return Prepared(encoder, parts, optimizer, scheduler, data_info, run_info, memory)

    def step(self, step: int) -> StepResult:
        sums, tokens = run_step(
            self.encoder,
            self.config,
            self.records,
            self.order.step(step),
            self.cache,
            self.teacher,
            self.env,
            self.memory,
            self.student,
        )
        return StepResult(sums, {"input_tokens": tokens})


def run_step(
    encoder,
    config: RunConfig,
    records,
    micro_batches: list[list[int]],
    cache,
    teacher,
    env: DistributedEnv = SINGLE_PROCESS,
    memory: NegativeMemory | None = None,
    student: StudentRunner | None = None,
) -> tuple[dict, int]:
    """Forward/backward over the micro-batches of one optimizer step (this rank's slice of each);
    returns the mean terms and input tokens of the whole step. ``student``: see compute_losses."""
    t = config.training
    length = encoder.lookahead.length
    sums: dict[str, float] = {}
    tokens = 0
    for chunk in micro_batches:
        local, contributes = local_indices(chunk, env)
        chunk_records = [records[i] for i in local]
        shard = MicroBatchShard(
            [records[i] for i in chunk] if env.enabled else chunk_records, chunk_records, contributes, env
        )
        if cache is not None:
            targets = cache.targets.select(local, encoder.device)
        elif teacher is None:  # no loss term reads the frozen LLM (reads_frozen_llm)
            targets = None
        else:
            targets = compute_llm_targets(teacher, chunk_records, length, t.batch_size, t.bf16, t.distill_content_words)
            targets = targets.select(range(len(local)), encoder.device)
        with autocast_for(encoder.device, t.bf16):
            terms = compute_losses(encoder, chunk_records, targets, config, shard, memory, student)
        if terms["loss"].requires_grad:  # a rank the micro-batch did not reach may hold no graph
            (terms["loss"] / len(micro_batches)).backward()
        for name, value in reported_terms(terms, config, env, encoder.device).items():
            sums[name] = sums.get(name, 0.0) + value / len(micro_batches)
        if contributes:
            tokens += sum(len(encoder.build_ids(r.text, r.instruction, length)) for r in chunk_records)
    return sums, int(sum_over_ranks(tokens, env, encoder.device))
