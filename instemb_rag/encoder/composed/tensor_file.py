"""The one reader of a small part's safetensors file (the gate, the effect map): present, and of
the shapes the part's config says, or a CheckpointError that says what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file

from ...errors import CheckpointError


def read_part_tensors(
    folder: str | Path,
    file_name: str,
    what: str,
    expected: dict[str, tuple],
    keep: Callable[[str, torch.Tensor], bool] = lambda name, tensor: True,
) -> dict[str, torch.Tensor]:
    """``file_name``'s tensors (those ``keep`` admits), checked against ``expected`` shapes;
    ``what`` names the part in messages ("a weight gate")."""
    path = Path(folder) / file_name
    if not path.is_file():
        raise CheckpointError(
            f"{folder}: its config names {what} but {file_name} is missing. Copy the whole folder again."
        )
    tensors = {name: tensor for name, tensor in load_file(str(path)).items() if keep(name, tensor)}
    if {name: tuple(tensor.shape) for name, tensor in tensors.items()} != expected:
        raise CheckpointError(f"{path} does not hold {what} of shape {expected}. The folder is damaged.")
    return tensors
