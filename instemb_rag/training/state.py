"""Trainer state in safetensors + JSON (never pickle): parameters, optimizer, scheduler, RNG.

trainer_params.safetensors     every trainable tensor in float32 (exact resume even when
                               the checkpoint's adapted weights are saved in bfloat16)
trainer_optimizer.safetensors  AdamW moments and step counts, keyed "<param index>.<name>"
trainer_rng.safetensors        torch CPU (and CUDA) generator states
trainer_state.json             step, optimizer param groups, scheduler state, data order
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..errors import CheckpointError

STATE_FILE = "trainer_state.json"
PARAMS_FILE = "trainer_params.safetensors"
OPTIMIZER_FILE = "trainer_optimizer.safetensors"
RNG_FILE = "trainer_rng.safetensors"


def write_trainer_state(
    folder: Path, named_params: dict[str, torch.nn.Parameter], optimizer, scheduler, info: dict
) -> None:
    save_file(
        {name: p.detach().float().cpu().contiguous() for name, p in named_params.items()}, str(folder / PARAMS_FILE)
    )
    optimizer_state = optimizer.state_dict()
    moments = {
        f"{index}.{key}": value.detach().cpu().contiguous()
        for index, slots in optimizer_state["state"].items()
        for key, value in slots.items()
        if torch.is_tensor(value)
    }
    save_file(moments, str(folder / OPTIMIZER_FILE))
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng.update({f"cuda{i}": state for i, state in enumerate(torch.cuda.get_rng_state_all())})
    save_file(rng, str(folder / RNG_FILE))
    scheduler_state = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    state = {"param_groups": optimizer_state["param_groups"], "scheduler": scheduler_state, **info}
    (folder / STATE_FILE).write_text(json.dumps(state, indent=2))


def read_trainer_state(folder: Path, named_params: dict[str, torch.nn.Parameter], optimizer, scheduler) -> dict:
    """Restore everything write_trainer_state wrote; returns the JSON info (step, data order...)."""
    try:
        state = json.loads((folder / STATE_FILE).read_text())
        params = load_file(str(folder / PARAMS_FILE))
        moments = load_file(str(folder / OPTIMIZER_FILE))
        rng = load_file(str(folder / RNG_FILE))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"Cannot resume from {folder}: trainer state unreadable ({exc}).") from exc
    if set(params) != set(named_params):
        raise CheckpointError(
            f"Cannot resume from {folder}: it trained {len(params)} tensors, this config trains "
            f"{len(named_params)}. Resume with the same model options, or start a new output_dir."
        )
    with torch.no_grad():
        for name, param in named_params.items():
            param.copy_(params[name].to(param.dtype))
    slots: dict[int, dict] = {}
    for key, value in moments.items():
        index, name = key.split(".", 1)
        slots.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": slots, "param_groups": state["param_groups"]})
    scheduler.load_state_dict({**scheduler.state_dict(), **state["scheduler"]})
    torch.set_rng_state(rng["cpu"])
    cuda_states = [rng[k] for k in sorted(k for k in rng if k.startswith("cuda"))]
    if cuda_states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda_states[: torch.cuda.device_count()])
    return state


def latest_checkpoint(output_dir: Path) -> Path | None:
    """The checkpoint-<step> folder with the highest step that holds a complete trainer state."""
    candidates = []
    for folder in Path(output_dir).glob("checkpoint-*"):
        suffix = folder.name.split("-", 1)[1]
        if suffix.isdigit() and (folder / STATE_FILE).is_file():
            candidates.append((int(suffix), folder))
    return max(candidates)[1] if candidates else None
