"""The one trainer loop: ``train(config) -> final checkpoint folder``, whichever recipe the config is.

objectives.py picks the run's objective from the config (look-ahead distillation, lookahead/;
a sentence encoder's geometry, geometry/); the objective prepares its data, student and
optimizer and runs the forward and backward passes of each step (objective.py says what one
is). This loop does the rest, the same for every recipe: the device and process group
(parallel.py), the seed, zero_grad, gradient sums over ranks, clipping, the optimizer and
scheduler steps, the metrics log and its plot, the progress bar, checkpoints every
``save_steps`` (resumable with ``--resume`` at the same step, batch for batch), pruning, and the
final folder.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from ..errors import InstEmbError
from . import parallel
from .args import TrainConfig
from .objective import Log, Objective, Prepared
from .objectives import objective_for
from .parallel import DistributedEnv
from .run_files import FINAL_DIR, MetricsLog, prune_checkpoints, resume_step, save_checkpoint, write_run_info

__all__ = ["train", "training_progress"]


def training_progress(enabled: bool):
    from rich.progress import TextColumn

    from ..progress import counting_progress

    return counting_progress("training", TextColumn("loss {task.fields[loss]}"), enabled=enabled)


def train(config: TrainConfig, log: Log = print) -> Path:
    """Train and return the final checkpoint folder (``<output_dir>/final``).

    Launched by torchrun (RANK/WORLD_SIZE set), every rank runs this; see parallel.py."""
    config.validate()
    kind = objective_for(config)
    env, device, owns_group = parallel.start(config.training.device)
    try:
        if env.enabled and not kind.data_parallel:
            raise InstEmbError(f"The {kind.name} recipe runs in one process: launch it without torchrun.")
        final = _run(kind(config, env, device, log), config, env)
        parallel.barrier(env)  # rank 0 may still be writing the final checkpoint
        return final
    finally:
        if owns_group:
            parallel.finish(env)


def _run(objective: Objective, config: TrainConfig, env: DistributedEnv) -> Path:
    t = config.training
    output_dir = Path(t.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(t.seed)
    run = objective.prepare()
    start_step = resume_step(config, run.parts, run.optimizer, run.scheduler, run.data_info, run.memory)
    params = list(run.parts.named.values())
    parallel.barrier(env)  # every rank has read the checkpoint before rank 0 writes new ones
    parallel.broadcast_from_main(params, env)
    parallel.reseed_for_rank(t.seed, start_step, env)
    metrics = MetricsLog(output_dir, start_step) if env.is_main else None
    if env.is_main:
        (output_dir / "train_config.json").write_text(json.dumps(config.to_dict(), indent=2))
        write_run_info(output_dir / "run_info.json", run.run_info, resumed_at=start_step)
    run.encoder.training_info = {"config": config.to_dict(), "data": run.data_info}
    objective.resumed(start_step)

    # A resumed run's clock goes on from the last logged step, so elapsed_s is the run's total.
    started = time.perf_counter() - (metrics.rows[-1]["elapsed_s"] if metrics is not None and metrics.rows else 0.0)
    with training_progress(t.show_progress and env.is_main) as bar:
        task = bar.add_task("train", total=t.max_steps, completed=start_step, loss="-")
        for step in range(start_step, t.max_steps):
            run.optimizer.zero_grad(set_to_none=True)
            result = objective.step(step)
            parallel.sum_gradients(params, env)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, t.max_grad_norm)
            run.optimizer.step()
            run.scheduler.step()
            done = step + 1
            parallel.simulate_failure_if_asked(done, env)
            bar.update(task, completed=done, loss=f"{result.terms['loss']:.4f}")
            if metrics is not None and (done % t.logging_steps == 0 or done == t.max_steps):
                metrics.add(
                    {
                        "step": done,
                        **{name: round(value, 6) for name, value in result.terms.items()},
                        "grad_norm": round(float(grad_norm), 4),
                        "lr": run.scheduler.get_last_lr()[objective.logged_lr_group],
                        **result.extra,
                        "elapsed_s": round(time.perf_counter() - started, 2),
                    }
                )
            if done == t.max_steps:
                run.encoder.eval()
                run.encoder.training_info = {**run.encoder.training_info, "steps": t.max_steps}
            if env.is_main and (done % t.save_steps == 0 or done == t.max_steps):
                _save(run, config, output_dir / f"checkpoint-{done}", done, metrics)
    run.encoder.eval()
    final = output_dir / FINAL_DIR
    if env.is_main:
        if start_step >= t.max_steps:  # resumed at the end: the last checkpoint is already there
            run.encoder.training_info = {**run.encoder.training_info, "steps": t.max_steps}
        save_checkpoint(final, run.encoder, run.parts, config)
    return final


def _save(run: Prepared, config: TrainConfig, folder: Path, step: int, metrics: MetricsLog | None) -> None:
    info = {"step": step, **run.data_info}
    save_checkpoint(folder, run.encoder, run.parts, config, run.optimizer, run.scheduler, info, run.memory)
    prune_checkpoints(Path(config.training.output_dir), config.training.save_total_limit)
    if metrics is not None:
        metrics.plot()
