"""WeightGate: the LLM space's weight of the two spaces, read per query off the LLM's pooled state.

"Find evidence about this claim" and "find evidence that refutes this claim" over one corpus want
different mixes of the LLM's space (which reads the instruction) and the sentence encoder's (plain
search); only the LLM reads which one was asked. The gate is one linear unit over the normalised
pooled state, through a sigmoid. It starts with zero weights and the bias at logit(w0), so an
untrained gate is exactly the fixed weight w0. A saved module: ``gate.safetensors`` beside its config
entry ``{"in_features": 576, "initial_weight": 0.5}``.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from ...errors import CheckpointError
from .tensor_file import read_part_tensors

GATE_FILE = "gate.safetensors"


class WeightGate(nn.Module):
    def __init__(self, in_features: int, initial_weight: float = 0.5):
        super().__init__()
        if not 0.0 < initial_weight < 1.0:
            raise CheckpointError(f"gate initial_weight must lie in (0, 1); got {initial_weight}.")
        self.linear = nn.Linear(in_features, 1)
        self.initial_weight = float(initial_weight)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.fill_(math.log(initial_weight / (1.0 - initial_weight)))

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        """The LLM space's weight per query [B], in (0, 1)."""
        normalised = F.normalize(pooled.float(), dim=-1).to(self.linear.weight.dtype)
        return torch.sigmoid(self.linear(normalised)).squeeze(-1).float()

    def get_config_dict(self) -> dict:
        return {"in_features": self.linear.in_features, "initial_weight": self.initial_weight}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().float().cpu().contiguous() for name, tensor in self.linear.state_dict().items()}

    def save(self, folder: str | Path) -> None:
        save_file(self.state_tensors(), str(Path(folder) / GATE_FILE))

    @classmethod
    def load(cls, folder: str | Path, config: dict) -> WeightGate:
        gate = cls(int(config["in_features"]), float(config["initial_weight"]))
        expected = {name: tuple(t.shape) for name, t in gate.state_tensors().items()}
        gate.linear.load_state_dict(read_part_tensors(folder, GATE_FILE, "a weight gate", expected))
        return gate
