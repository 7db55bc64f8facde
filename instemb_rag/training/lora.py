"""LoRA (through peft) on the top decoder layers, saving it in safetensors and merging it at load."""

from __future__ import annotations

import copy
import json
import math
import os
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..errors import CheckpointError

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def apply_lora(model, layer_indices: list[int], rank: int, alpha: float, dropout: float, target_modules: list[str]):
    """Inject LoRA layers into ``model`` in place (only in ``layer_indices``); returns the PeftModel.

    The injection happens inside ``model``'s own module tree, so code that holds ``model``
    (the encoder) runs the adapted layers without knowing about peft.
    """
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        layers_to_transform=list(layer_indices),
        bias="none",
    )
    with warnings.catch_warnings():
        # peft asks transformers a deprecated question (is_gradient_checkpointing); not ours to fix.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, config)


def lora_state_dict(peft_model) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(peft_model)


def save_lora_adapter(peft_model, folder: str | os.PathLike, dtype: torch.dtype = torch.float32,
                      base_reference: str | None = None) -> None:
    """peft's folder layout (adapter_config.json + adapter_model.safetensors), weights in ``dtype``.

    ``base_reference`` replaces peft's record of the base model's local path (a cache folder on
    the training machine) with the checkpoint's portable base reference.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: tensor.detach().to(dtype).cpu().contiguous() for name, tensor in lora_state_dict(peft_model).items()}
    save_file(tensors, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    adapter_config = peft_model.peft_config["default"]
    if base_reference is not None:
        adapter_config = copy.copy(adapter_config)
        adapter_config.base_model_name_or_path = base_reference
    adapter_config.save_pretrained(str(folder))


def merge_lora_adapter(model, lora_folder: str | os.PathLike, subtract: bool = False) -> None:
    """Merge the LoRA adapter in ``lora_folder`` into ``model``'s weights: W += scale * B @ A
    (``subtract=True`` takes a merged adapter out again: W -= scale * B @ A).

    Done directly from the adapter's safetensors and config rather than through peft, because
    importing peft alone takes seconds and every load of a shipped checkpoint would pay it.
    After merging, ``model`` is a plain transformers model, so inference costs nothing extra.
    The result equals peft's ``merge_and_unload`` (tests check this).
    """
    lora_folder = Path(lora_folder)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (lora_folder / name).is_file():
            raise CheckpointError(f"{lora_folder} lacks {name}: the LoRA adapter of this checkpoint is incomplete.")
    config = json.loads((lora_folder / ADAPTER_CONFIG).read_text())
    unsupported = [key for key in ("use_dora", "fan_in_fan_out") if config.get(key)]
    if unsupported or config.get("peft_type", "LORA") != "LORA":
        raise CheckpointError(f"{lora_folder / ADAPTER_CONFIG}: only plain LoRA adapters can be merged "
                              f"(found peft_type={config.get('peft_type')}, {unsupported}).")
    rank = int(config["r"])
    scale = config["lora_alpha"] / (math.sqrt(rank) if config.get("use_rslora") else rank)
    scale = -scale if subtract else scale
    tensors = load_file(str(lora_folder / ADAPTER_WEIGHTS))
    params = dict(model.named_parameters())
    for key in sorted(k for k in tensors if k.endswith(".lora_A.weight")):
        stem = key[: -len(".lora_A.weight")]
        target = stem.removeprefix("base_model.model.") + ".weight"
        if target not in params or f"{stem}.lora_B.weight" not in tensors:
            raise CheckpointError(f"{lora_folder / ADAPTER_WEIGHTS}: adapter tensor {key} has no matching "
                                  f"weight {target} in the base model (trained on another architecture?).")
        weight = params[target]
        delta = tensors[f"{stem}.lora_B.weight"].float() @ tensors[key].float()
        if delta.shape != weight.shape:
            raise CheckpointError(f"{lora_folder / ADAPTER_WEIGHTS}: {stem} gives shape {tuple(delta.shape)}, "
                                  f"the base weight is {tuple(weight.shape)}.")
        with torch.no_grad():
            weight.copy_((weight.float() + scale * delta.to(weight.device)).to(weight.dtype))
