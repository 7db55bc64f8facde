"""EffectMap: what the instruction-effect query side learns, over the LLM's query vectors.

Input, per query: D(q, i), the LLM's query vector under the user's instruction, and D(q, r),
under the reference instruction; their difference is the instruction's effect. Output:

    h(effect) = effect + up(down(effect))            identity plus a low-rank map
    gain(q)   = 2 sigmoid(w . [D(q, i); effect] + b)  how much of the effect this query keeps

``up`` starts at zero and the gain's weights at zero (bias 0: gain 1), so an untrained map is
the identity at full gain: exactly the measured arrangement. The gain is the per-query share of
the user's instruction strength (a generic instruction learns a gain near 0: it should move
nothing). A saved module: ``effect_map.safetensors`` beside its config entry
``{"dimension": 576, "rank": 32}``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from ...errors import CheckpointError
from .tensor_file import read_part_tensors

EFFECT_MAP_FILE = "effect_map.safetensors"


class EffectMap(nn.Module):
    def __init__(self, dimension: int, rank: int = 32):
        super().__init__()
        if rank < 0 or rank > dimension:
            raise CheckpointError(f"effect map rank must lie in [0, {dimension}]; got {rank}.")
        self.dimension, self.rank = int(dimension), int(rank)
        # Rank 0: h is the identity and only the gain trains (no empty layers to build or store).
        self.down = nn.Linear(dimension, rank, bias=False) if rank else None
        self.up = nn.Linear(rank, dimension, bias=False) if rank else None
        self.gain = nn.Linear(2 * dimension, 1)
        with torch.no_grad():
            if self.up is not None:
                self.up.weight.zero_()
            self.gain.weight.zero_()
            self.gain.bias.zero_()

    def forward(
        self, under_instruction: torch.Tensor, under_reference: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(h(effect) [B, d], gain [B]) of unit query vectors under the instruction and the reference."""
        effect = (under_instruction - under_reference).float()
        mapped = effect + self.up(self.down(effect)) if self.rank else effect
        gain = 2.0 * torch.sigmoid(self.gain(torch.cat([under_instruction.float(), effect], dim=-1))).squeeze(-1)
        return mapped, gain

    def get_config_dict(self) -> dict:
        return {"dimension": self.dimension, "rank": self.rank}

    def state_tensors(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().float().cpu().contiguous() for name, tensor in self.state_dict().items()}

    def save(self, folder: str | Path) -> None:
        save_file(self.state_tensors(), str(Path(folder) / EFFECT_MAP_FILE))

    @classmethod
    def load(cls, folder: str | Path, config: dict) -> EffectMap:
        effect_map = cls(int(config["dimension"]), int(config["rank"]))
        expected = {name: tuple(t.shape) for name, t in effect_map.state_tensors().items()}
        # Folders written before rank 0 had no layers stored empty down/up tensors: nothing to load.
        tensors = read_part_tensors(
            folder, EFFECT_MAP_FILE, "an effect map", expected, keep=lambda _, t: bool(t.numel() or effect_map.rank)
        )
        effect_map.load_state_dict(tensors)
        return effect_map
