"""Projection: an optional linear head from the pooled embedding into a teacher's space.

Like sentence-transformers' ``Dense`` module, it is a saved module of the LLM folder
(``projection.safetensors`` + the ``projection`` entry of ``instemb_config.json``). A sentence
encoder teacher has its own dimension (384 for MiniLM, 768 for mpnet); the head maps the
student's pooled embedding there, so the distillation loss compares like with like and the
shipped embedding is the head's output (its dimension is the encoder's ``dimension``).

The pooled embedding is L2-normalised before the map (``normalize_input``): the decoder's
pooled states have a large, text-independent norm component, and the closed-form fit
(``fit_ridge``) that starts the head was measured on normalised inputs.

``input_weight`` keeps part of the student's own geometry: with w > 0 the embedding is
``[sqrt(w) * normalise(pooled), sqrt(1 - w) * normalise(head(pooled))]``, so the cosine of two
embeddings is ``w * cos(pooled) + (1 - w) * cos(head)``. A head fitted on general texts can
flatten what the backbone already told apart (a domain the fit saw little of); the blend keeps
that. Training always fits and trains the head alone (``teacher_space``); a blend is a new view
of a trained head (``with_input_weight``), chosen on training-side validation.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from ...errors import CheckpointError

PROJECTION_FILE = "projection.safetensors"


class Projection(nn.Module):
    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        normalize_input: bool = True,
        input_weight: float = 0.0,
    ):
        super().__init__()
        if not 0.0 <= input_weight < 1.0:
            raise CheckpointError(f"projection input_weight must lie in [0, 1); got {input_weight}.")
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.normalize_input = normalize_input
        self.input_weight = float(input_weight)

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        """Width of the teacher's space (what the head maps into)."""
        return self.linear.out_features

    @property
    def dimension(self) -> int:
        """Width of the embedding this module returns: the teacher's space, plus the pooled
        embedding itself when blended."""
        return self.out_features + (self.in_features if self.input_weight > 0 else 0)

    def teacher_space(self, pooled: torch.Tensor) -> torch.Tensor:
        """The head's map alone (un-normalised): what distillation compares with the teacher."""
        if self.normalize_input:
            pooled = F.normalize(pooled.float(), dim=-1)
        return self.linear(pooled.to(self.linear.weight.dtype))

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        mapped = self.teacher_space(pooled)
        if self.input_weight == 0:
            return mapped
        from ..combine import side_by_side

        return side_by_side(pooled, mapped, self.input_weight)

    def with_input_weight(self, input_weight: float) -> Projection:
        """A view of this head (shared weights) that blends in the pooled embedding (see above)."""
        view = Projection(
            self.in_features, self.out_features, self.linear.bias is not None, self.normalize_input, input_weight
        )
        view.linear = self.linear
        return view

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
            # Only when blended, so the fingerprints of heads saved before blends existed stay valid.
            **({"input_weight": self.input_weight} if self.input_weight > 0 else {}),
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
                "Copy the whole LLM folder again."
            )
        head = cls(**config)
        tensors = load_file(str(path))
        expected = {name: tuple(t.shape) for name, t in head.state_tensors().items()}
        found = {name: tuple(t.shape) for name, t in tensors.items()}
        if expected != found:
            raise CheckpointError(
                f"{path} holds {found}, but its config describes {expected}. The LLM folder is damaged."
            )
        with torch.no_grad():
            head.linear.weight.copy_(tensors["weight"])
            if head.linear.bias is not None:
                head.linear.bias.copy_(tensors["bias"])
        return head
