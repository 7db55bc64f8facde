"""The InstEmb distillation trainer: ``train(config) -> final checkpoint folder``.

One optimizer step = ``gradient_accumulation_steps`` micro-batches of ``batch_size`` records.
Per micro-batch the student runs:

    1. ``[x; s]``                 look-ahead states (distillation) and the |x| state (view 1)
    2. ``x`` with embedding dropout  view 2 (Llama has no dropout layers, so the SimCSE-style
                                   second mask is dropout on the input embeddings); the
                                   look-ahead slots are left out because a causal model's
                                   |x| state cannot see them
    3. ``y`` as input text        view 4 (InputLast of the answer)

View 3 and the distillation targets come from the teacher cache (see teacher_cache.py).
With ``model.frozen_prefix`` these passes run only the top K layers on cached states of the
frozen layers below (cached_student.py; view 2's dropout then acts on those states).

This module is the loop; each concern it runs has its own module: the records (records.py,
builders.py) and their order (data_order.py), the student's set-up and passes (student.py), the
teacher's targets (teacher_cache.py), the losses (objective.py), the run's files (run_files.py)
and data parallelism (parallel.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from ..choices import ParallelMode
from ..datasets.records import open_records
from . import parallel
from .args import TrainConfig
from .cached_student import prepare_student
from .cpu_threads import set_training_threads
from .data_order import DataOrder, record_lengths
from .negative_memory import NegativeMemory
from .objective import compute_losses, reported_terms
from .parallel import SINGLE_PROCESS, DistributedEnv, MicroBatchShard, local_indices, sum_over_ranks
from .run_files import FINAL_DIR, MetricsLog, prune_checkpoints, resume_step, save_checkpoint, write_run_info
from .student import (
    StudentRunner,
    build_optimizer,
    decoder_layers,
    enable_gradient_checkpointing,
    load_student,
    make_trainable,
    refuse_sharded_adapted_tensors,
)
from .teacher_cache import autocast_for, compute_teacher_targets, file_digest, prepare_teacher
from .train_file import check_distill_sets_are_present, check_hard_negatives_have_a_loss, resolve_train_file

__all__ = ["run_step", "train", "training_progress"]


def training_progress(enabled: bool):
    from rich.progress import TextColumn

    from ..progress import counting_progress

    return counting_progress("training", TextColumn("loss {task.fields[loss]}"), enabled=enabled)


def run_step(
    encoder,
    config: TrainConfig,
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
        elif teacher is None:  # no loss term reads the teacher (reads_teacher)
            targets = None
        else:
            targets = compute_teacher_targets(
                teacher, chunk_records, length, t.batch_size, t.bf16, t.distill_content_words
            )
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


def train(config: TrainConfig) -> Path:
    """Train and return the final checkpoint folder (``<output_dir>/final``).

    Launched by torchrun (RANK/WORLD_SIZE set), every rank runs this; see parallel.py."""
    config.validate()
    env, device, owns_group = parallel.start(config.training.device)
    try:
        final = _train(config, env, device)
        parallel.barrier(env)  # rank 0 may still be writing the final checkpoint
        return final
    finally:
        if owns_group:
            parallel.finish(env)


def _train(config: TrainConfig, env: DistributedEnv, device: torch.device) -> Path:
    t = config.training
    output_dir = Path(t.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    parallel.check_batch_fits(t.batch_size, env)
    torch.manual_seed(t.seed)

    if env.is_main:  # only rank 0 builds the records; the others read them once it is done
        resolve_train_file(config)
    parallel.barrier(env)
    train_file = resolve_train_file(config)
    records = open_records(train_file)  # streamed: validated in one pass, read again by index
    check_hard_negatives_have_a_loss(records, config, train_file)
    check_distill_sets_are_present(records, config, train_file)
    per_step = t.batch_size * t.gradient_accumulation_steps
    lengths = record_lengths(records) if t.bucket_by_length else None
    order = DataOrder(records.groups, t.batch_size, t.gradient_accumulation_steps, t.seed, lengths)
    encoder = load_student(config, device)
    run_info: dict = {"device": str(device), "records": len(records), "world_size": env.world_size}
    run_info["torch_threads"] = set_training_threads(device.type) or torch.get_num_threads()
    cache, teacher = prepare_teacher(config, encoder, records, order, run_info, env)

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
        "examples_per_step": per_step,
    }
    memory = NegativeMemory(t.negative_memory, encoder.dimension) if t.negative_memory else None
    start_step = resume_step(config, parts, optimizer, scheduler, data_info, memory)
    parallel.barrier(env)  # every rank has read the checkpoint before rank 0 writes new ones
    parallel.broadcast_from_main(list(parts.named.values()), env)
    parallel.reseed_for_rank(t.seed, start_step, env)
    metrics = MetricsLog(output_dir, start_step) if env.is_main else None
    if env.is_main:
        (output_dir / "train_config.json").write_text(json.dumps(config.to_dict(), indent=2))
        write_run_info(output_dir / "run_info.json", run_info, resumed_at=start_step)
    encoder.training_info = {"config": config.to_dict(), "data": data_info}

    encoder.train()
    # A resumed run's clock goes on from the last logged step, so elapsed_s is the run's total.
    started = time.perf_counter() - (metrics.rows[-1]["elapsed_s"] if metrics is not None and metrics.rows else 0.0)
    with training_progress(t.show_progress and env.is_main) as bar:
        task = bar.add_task("train", total=t.max_steps, completed=start_step, loss="-")
        for step in range(start_step, t.max_steps):
            optimizer.zero_grad(set_to_none=True)
            sums, tokens = run_step(encoder, config, records, order.step(step), cache, teacher, env, memory, student)
            parallel.sum_gradients(list(parts.named.values()), env)
            grad_norm = torch.nn.utils.clip_grad_norm_(list(parts.named.values()), t.max_grad_norm)
            optimizer.step()
            scheduler.step()
            done = step + 1
            parallel.simulate_failure_if_asked(done, env)
            bar.update(task, completed=done, loss=f"{sums['loss']:.4f}")
            if metrics is not None and (done % t.logging_steps == 0 or done == t.max_steps):
                metrics.add(
                    {
                        "step": done,
                        **{k: round(v, 6) for k, v in sums.items()},
                        "grad_norm": round(float(grad_norm), 4),
                        "lr": scheduler.get_last_lr()[-1],
                        "input_tokens": tokens,
                        "elapsed_s": round(time.perf_counter() - started, 2),
                    }
                )
            if env.is_main and done % t.save_steps == 0 and done < t.max_steps:
                save_checkpoint(
                    output_dir / f"checkpoint-{done}",
                    encoder,
                    parts,
                    config,
                    optimizer,
                    scheduler,
                    {"step": done, **data_info},
                    memory,
                )
                prune_checkpoints(output_dir, t.save_total_limit)
                metrics.plot()
    encoder.eval()
    encoder.training_info = {**encoder.training_info, "steps": t.max_steps}
    final = output_dir / FINAL_DIR
    if env.is_main:
        save_checkpoint(
            output_dir / f"checkpoint-{t.max_steps}",
            encoder,
            parts,
            config,
            optimizer,
            scheduler,
            {"step": t.max_steps, **data_info},
            memory,
        )
        prune_checkpoints(output_dir, t.save_total_limit)
        save_checkpoint(final, encoder, parts, config)
        metrics.plot()
    return final
