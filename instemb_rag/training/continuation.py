"""Training on from an InstEmb checkpoint (``model.model_name_or_path`` = a checkpoint folder).

A checkpoint loads with its LoRA adapter merged into the weights and its adapted tensors copied
in, but a checkpoint written by the next run stores only what *that* run trains: without care,
everything the earlier run learned in the backbone would silently vanish from the new
checkpoint. So:

- the earlier LoRA adapter is taken out of the weights again and becomes the starting value of
  the new run's adapter (same rank, alpha, target modules and layers, or a clear error);
- every tensor the earlier checkpoint adapted is written again by the new one, trained or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file

from ..checkpoint import ADAPTED_FILE, LORA_DIR, check_complete, is_checkpoint, read_config
from ..errors import InstEmbError
from .lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, merge_lora_adapter


@dataclass(frozen=True)
class StartingCheckpoint:
    folder: Path
    adapted_names: list[str]  # backbone tensors the checkpoint replaced
    lora_folder: Path | None  # its LoRA adapter, merged on load


def starting_checkpoint(reference: str | None) -> StartingCheckpoint | None:
    """What the run starts from, when ``reference`` is an InstEmb checkpoint folder."""
    if not reference or not is_checkpoint(reference):
        return None
    folder = Path(reference)
    check_complete(folder, read_config(folder))  # training on from part of a checkpoint would lose the rest
    adapted_path = folder / ADAPTED_FILE
    names: list[str] = []
    if adapted_path.is_file():
        with safe_open(str(adapted_path), framework="pt") as handle:
            names = sorted(handle.keys())
    lora_folder = folder / LORA_DIR
    return StartingCheckpoint(folder, names, lora_folder if lora_folder.is_dir() else None)


def check_continuation(start: StartingCheckpoint | None, lora_rank: int, lora_alpha: float,
                       target_modules: list[str], layers: list[int]) -> None:
    """Checked before any work: the run must be able to carry the checkpoint's adapter on."""
    if start is None or start.lora_folder is None:
        return
    saved = json.loads((start.lora_folder / ADAPTER_CONFIG).read_text())
    if lora_rank <= 0 or not layers:
        raise InstEmbError(
            f"{start.folder} was trained with a LoRA adapter (rank {saved.get('r')}) but this run trains "
            f"no LoRA (model.lora_rank={lora_rank}), so its checkpoints would lose that adapter. Continue "
            f"it with model.lora_rank={saved.get('r')} (and the same lora_alpha, target modules and top layers)."
        )
    wanted = {"r": lora_rank, "lora_alpha": lora_alpha, "target_modules": sorted(target_modules),
              "layers_to_transform": sorted(layers)}
    found = {"r": saved.get("r"), "lora_alpha": saved.get("lora_alpha"),
             "target_modules": sorted(saved.get("target_modules") or []),
             "layers_to_transform": sorted(saved.get("layers_to_transform") or [])}
    differing = [key for key in wanted if wanted[key] != found[key]]
    if differing:
        detail = ", ".join(f"{key}: checkpoint {found[key]}, this run {wanted[key]}" for key in differing)
        raise InstEmbError(
            f"{start.folder}: its LoRA adapter does not match this run's ({detail}). Use the "
            "checkpoint's LoRA settings (model.lora_rank, lora_alpha, lora_target_modules, "
            "trainable_top_layers) to continue training it."
        )


def take_out_merged_lora(model, start: StartingCheckpoint | None) -> None:
    """Undo the load-time merge so the adapter can go on training as an adapter."""
    if start is not None and start.lora_folder is not None:
        merge_lora_adapter(model, start.lora_folder, subtract=True)


def load_starting_adapter(peft_model, start: StartingCheckpoint | None) -> None:
    """Copy the checkpoint's adapter weights into the freshly injected adapter of this run
    (``check_continuation`` has made sure the two have the same shape)."""
    if start is None or start.lora_folder is None:
        return
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(peft_model, load_file(str(start.lora_folder / ADAPTER_WEIGHTS)))
    if result.unexpected_keys:
        raise InstEmbError(f"{start.folder / LORA_DIR}: adapter tensors {result.unexpected_keys[:3]} fit no "
                           "module of this model.")


def parameter_for(params: dict, name: str):
    """The parameter saved as ``name``; inside a module that LoRA wraps, peft renames the
    weight to ``...base_layer.weight`` while the checkpoint keeps the plain name."""
    if name in params:
        return params[name]
    stem, _, leaf = name.rpartition(".")
    wrapped = f"{stem}.base_layer.{leaf}"
    if wrapped in params:
        return params[wrapped]
    raise InstEmbError(f"The starting checkpoint adapted {name}, which this model lacks.")
