"""What a training run writes in its output folder: checkpoints (encoder + trainer state),
their pruning, metrics.jsonl with its loss curve, run_info.json, and the resume from the latest
checkpoint. The trainer (trainer.py) and the geometry run (geometry.py) both write through here.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

from ..encoder import llm_folder
from ..errors import InstEmbError
from .args import TrainConfig
from .lookahead.frozen_llm import file_digest
from .lookahead.negative_memory import NegativeMemory
from .state import latest_checkpoint, read_trainer_state, write_trainer_state
from .student import TrainableParts

__all__ = [
    "FINAL_DIR",
    "SAVE_DTYPES",
    "MetricsLog",
    "prune_checkpoints",
    "resume_step",
    "save_checkpoint",
    "write_run_info",
]

SAVE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
FINAL_DIR = "final"


def save_checkpoint(
    folder: Path,
    encoder,
    parts: TrainableParts,
    config: TrainConfig,
    optimizer=None,
    scheduler=None,
    info: dict | None = None,
    memory: NegativeMemory | None = None,
) -> None:
    """An encoder checkpoint folder (loadable by InstEmbEncoder.from_pretrained), plus the
    trainer state (and the negative memory) when ``optimizer`` is given; written atomically as one folder."""

    def trainer_state(staging: Path) -> None:
        if optimizer is not None:
            write_trainer_state(staging, parts.named, optimizer, scheduler, info or {})
            if memory is not None:
                memory.save(staging)

    dtype = SAVE_DTYPES[config.training.save_dtype]

    def save_trained(llm, sub: Path, also=None) -> None:  # the trained LLM: its trained tensors, saved setting
        saved = llm.with_options(max_length=config.model.inference_max_length)
        llm_folder.save(saved, sub, trained=parts.adapted_names, dtype=dtype, also=also)

    parts_of = getattr(encoder, "parts", None)
    if parts_of is None:  # a symmetric encoder: its checkpoint is the folder
        save_trained(encoder, folder, also=trainer_state)
    else:  # an encoder of parts (encoder/composed/): the query side's LLM trained, if it has one
        encoder.save(
            folder, also=trainer_state, savers={"query_llm": save_trained} if "query_llm" in parts_of else None
        )


def prune_checkpoints(output_dir: Path, keep: int) -> None:
    found = sorted(
        (int(p.name.split("-", 1)[1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit()
    )
    for _, folder in found[: max(0, len(found) - keep)]:
        shutil.rmtree(folder, ignore_errors=True)


class MetricsLog:
    """metrics.jsonl (one line per logged step) and loss_curve.png, rewound on resume."""

    def __init__(self, output_dir: Path, resume_step: int):
        self.path = output_dir / "metrics.jsonl"
        self.rows: list[dict] = []
        if resume_step and self.path.is_file():
            self.rows = [r for r in map(json.loads, self.path.read_text().splitlines()) if r["step"] <= resume_step]
        self._rewrite()

    def _rewrite(self) -> None:
        self.path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))

    def add(self, row: dict) -> None:
        self.rows.append(row)
        with open(self.path, "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def plot(self) -> Path | None:
        if not self.rows:
            return None
        try:
            import matplotlib
        except ImportError:  # a training run does not fail over its picture: it says so, once
            if not getattr(self, "said_no_plot", False):
                self.said_no_plot = True
                print(
                    f"note: {self.path.with_name('loss_curve.png')} is not drawn: matplotlib is not installed "
                    f"(pip install 'instemb-rag[train]'); the losses are in {self.path.name}.",
                    file=sys.stderr,
                )
            return None
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 3.5))
        steps = [r["step"] for r in self.rows]
        for key in ("loss", "distill", "contrastive"):
            if key in self.rows[0]:
                axis.plot(steps, [r[key] for r in self.rows], label=key)
        axis.set_xlabel("optimizer step")
        axis.set_ylabel("loss")
        axis.legend()
        axis.grid(alpha=0.3)
        figure.tight_layout()
        out = self.path.with_name("loss_curve.png")
        figure.savefig(out, dpi=100)
        plt.close(figure)
        return out


def write_run_info(path: Path, run_info: dict, resumed_at: int) -> None:
    """run_info.json of this invocation, which says where it started: ``start_step``,
    ``started_at`` (UTC) and ``config_sha256`` (of the train_config.json written beside it, so a
    resume with other settings shows). A resumed run keeps every earlier invocation, oldest
    first, under ``sessions`` (each with the same fields: where the teacher targets were
    computed, on which device), so the history grows by one entry per resume."""
    from datetime import datetime, timezone

    config_file = path.parent / "train_config.json"
    invocation = {
        **run_info,
        "start_step": resumed_at,
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config_sha256": file_digest(config_file) if config_file.is_file() else None,
    }
    sessions = []
    if resumed_at and path.is_file():
        earlier = json.loads(path.read_text())
        sessions = earlier.pop("sessions", []) + [earlier]
    info = {**invocation, "resumed_at_step": resumed_at, "sessions": sessions} if resumed_at else invocation
    path.write_text(json.dumps(info, indent=2))


def resume_step(
    config: TrainConfig,
    parts: TrainableParts,
    optimizer,
    scheduler,
    data_info: dict,
    memory: NegativeMemory | None = None,
) -> int:
    """Restore the latest checkpoint's trainer state and negative memory (when resuming) and return its step."""
    last = latest_checkpoint(Path(config.training.output_dir)) if config.training.resume else None
    if last is None:
        return 0
    state = read_trainer_state(last, parts.named, optimizer, scheduler)
    if state.get("data_sha256") != data_info["data_sha256"] or state.get("seed") != data_info["seed"]:
        raise InstEmbError(
            f"Cannot resume from {last}: it was trained on other data or another seed. "
            "Use the same data and seed, or a new output_dir."
        )
    if memory is not None:
        memory.load(last)
    return int(state["step"])
