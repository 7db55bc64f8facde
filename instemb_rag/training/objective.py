"""What a recipe plugs into the one trainer loop (trainer.py): an ``Objective``.

The loop owns what every recipe does the same way: the device and process group, the seed,
zero_grad, clipping, the optimizer and scheduler steps, the metrics log and its plot, the
progress bar, checkpoints (save, resume, prune) and the final folder. An objective owns what
differs: its data and caches, the student's set-up, its optimizer's parameter groups, and the
forward and backward passes of one optimizer step, as sentence-transformers' trainer delegates
to a loss module. Each objective names its loss terms and their weights once (``term_weights``).

A new recipe is a subpackage (like lookahead/ and geometry/) with one ``Objective`` subclass and
an entry in objectives.py, which decides from the config which objective a run trains.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import torch

from .common_args import RunConfig
from .parallel import DistributedEnv

Log = Callable[[str], None]


@dataclass
class Prepared:
    """What an objective's ``prepare`` hands the loop."""

    encoder: Any  # the InstEmbEncoder being trained
    parts: Any  # student.TrainableParts: the named trainable parameters
    optimizer: torch.optim.Optimizer
    scheduler: Any
    data_info: dict  # saved in every checkpoint's trainer state; a resume must find the same
    run_info: dict = field(default_factory=dict)  # written to run_info.json
    memory: Any = None  # extra state saved with checkpoints (lookahead's negative memory)


@dataclass
class StepResult:
    """One optimizer step's losses (``loss`` and each term, as floats) and extra metrics to log."""

    terms: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)


class Objective(ABC):
    """One recipe's objective: built from the config, the run's process env and device."""

    name: ClassVar[str]
    # The optimizer group whose learning rate the metrics log shows.
    logged_lr_group: ClassVar[int] = -1
    # Whether the objective runs under torchrun (data parallel); the loop refuses otherwise.
    data_parallel: ClassVar[bool] = False

    def __init__(self, config: RunConfig, env: DistributedEnv, device: torch.device, log: Log = print):
        self.config, self.env, self.device, self.log = config, env, device, log

    @staticmethod
    @abstractmethod
    def term_weights(config: RunConfig) -> dict[str, float]:
        """Each loss term's weight, by term name (a term with weight 0 is not computed)."""

    @abstractmethod
    def prepare(self) -> Prepared:
        """Read the data, build caches, load and set up the student, build the optimizer."""

    def resumed(self, start_step: int) -> None:
        """Called once the loop has restored a checkpoint (or found none) at ``start_step``."""
        return None

    @abstractmethod
    def step(self, step: int) -> StepResult:
        """Forward and backward over optimizer step ``step``'s batches (gradients accumulated)."""


def weighted_sum(terms: dict[str, torch.Tensor], weights: dict[str, float], start=None):
    """sum(weight * term) over the computed terms, in their order (``start``: the empty sum)."""
    values = (weights[name] * value for name, value in terms.items())
    return sum(values, start) if start is not None else sum(values)
