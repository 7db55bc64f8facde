"""Projection: an optional linear head from the pooled embedding into a teacher's space.

Like sentence-transformers' ``Dense`` module, it is a saved module of the checkpoint
(``projection.safetensors`` + the ``projection`` entry of ``instemb_config.json``). A sentence
encoder teacher has its own dimension (384 for MiniLM, 768 for mpnet); the head maps the
student's pooled embedding there, so the distillation loss compares like with like and the
shipped embedding is the head's output (its dimension is the encoder's ``dimension``).

The pooled embedding is L2-normalised before the map (``normalize_input``): the decoder's
pooled states have a large, text-independent norm component, and the closed-form fit
(``fit_ridge``) that starts the head was measured on normalised inputs.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from ..errors import CheckpointError

PROJECTION_FILE = "projection.safetensors"


class Projection(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True, normalize_input: bool = True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.normalize_input = normalize_input

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        return self.linear.out_features

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        if self.normalize_input:
            pooled = F.normalize(pooled.float(), dim=-1)
        return self.linear(pooled.to(self.linear.weight.dtype))

    # ------------------------------------------------------------------ closed-form start
    @torch.no_grad()
    def fit_ridge(self, pooled: torch.Tensor, targets: torch.Tensor, ridge: float = 0.01) -> float:
        """Set the weights to the ridge-regression map from ``pooled`` [N, in] to ``targets`` [N, out].

        Returns the mean cosine between the fitted outputs and the targets (how much of the
        teacher's geometry a linear map already recovers). The bias is fitted through centring.
        """
        inputs = F.normalize(pooled.double(), dim=-1) if self.normalize_input else pooled.double()
        targets = targets.double()
        if inputs.shape[0] != targets.shape[0] or inputs.shape[0] < 2:
            raise ValueError(f"fit_ridge needs matching rows (>= 2); got {inputs.shape[0]} and {targets.shape[0]}.")
        has_bias = self.linear.bias is not None
        input_mean = inputs.mean(0) if has_bias else torch.zeros_like(inputs[0])
        target_mean = targets.mean(0) if has_bias else torch.zeros_like(targets[0])
        centred, centred_targets = inputs - input_mean, targets - target_mean
        gram = centred.T @ centred + ridge * inputs.shape[0] * torch.eye(inputs.shape[1], dtype=torch.float64)
        weight = torch.linalg.solve(gram, centred.T @ centred_targets)  # [in, out]
        self.linear.weight.copy_(weight.T.to(self.linear.weight.dtype))
        if has_bias:
            self.linear.bias.copy_((target_mean - input_mean @ weight).to(self.linear.bias.dtype))
        fitted = inputs @ weight + (target_mean - input_mean @ weight)
        return float(F.cosine_similarity(fitted, targets, dim=-1).mean())

    # ------------------------------------------------------------------ saved module
    def get_config_dict(self) -> dict:
        return {
            "in_features": self.in_features,
            "out_features": self.out_features,
            "bias": self.linear.bias is not None,
            "normalize_input": self.normalize_input,
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        tensors = {"weight": self.linear.weight.detach().float().cpu().contiguous()}
        if self.linear.bias is not None:
            tensors["bias"] = self.linear.bias.detach().float().cpu().contiguous()
        return tensors

    def save(self, folder: str | Path) -> None:
        save_file(self.state_tensors(), str(Path(folder) / PROJECTION_FILE))

    @classmethod
    def load(cls, folder: str | Path, config: dict) -> Projection:
        path = Path(folder) / PROJECTION_FILE
        if not path.is_file():
            raise CheckpointError(
                f"{folder}: instemb_config.json names a projection head but {PROJECTION_FILE} is missing. "
                "Copy the whole checkpoint folder again."
            )
        head = cls(**config)
        tensors = load_file(str(path))
        expected = {name: tuple(t.shape) for name, t in head.state_tensors().items()}
        found = {name: tuple(t.shape) for name, t in tensors.items()}
        if expected != found:
            raise CheckpointError(
                f"{path} holds {found}, but its config describes {expected}. The checkpoint is damaged."
            )
        with torch.no_grad():
            head.linear.weight.copy_(tensors["weight"])
            if head.linear.bias is not None:
                head.linear.bias.copy_(tensors["bias"])
        return head
