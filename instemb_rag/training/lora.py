"""LoRA (through peft) on the top decoder layers, saving it in safetensors and merging it at load."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import save_file

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
    return get_peft_model(model, config)


def lora_state_dict(peft_model) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(peft_model)


def save_lora_adapter(peft_model, folder: str | os.PathLike, dtype: torch.dtype = torch.float32) -> None:
    """peft's folder layout (adapter_config.json + adapter_model.safetensors), weights in ``dtype``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: tensor.detach().to(dtype).cpu().contiguous() for name, tensor in lora_state_dict(peft_model).items()}
    save_file(tensors, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    peft_model.peft_config["default"].save_pretrained(str(folder))


def merge_lora_adapter(model, lora_folder: str | os.PathLike) -> None:
    """Load the adapter in ``lora_folder`` onto ``model`` and merge it into the base weights.

    After merging, ``model`` is a plain transformers model again (no peft modules), so
    inference costs nothing extra. ``requires_grad`` flags are restored as they were, since
    peft freezes everything while loading.
    """
    from peft import PeftModel

    lora_folder = Path(lora_folder)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (lora_folder / name).is_file():
            raise CheckpointError(f"{lora_folder} lacks {name}: the LoRA adapter of this checkpoint is incomplete.")
    flags = {name: param.requires_grad for name, param in model.named_parameters()}
    try:
        peft_model = PeftModel.from_pretrained(model, str(lora_folder), is_trainable=False)
    except (ValueError, RuntimeError, KeyError) as exc:
        raise CheckpointError(f"Could not load the LoRA adapter in {lora_folder}: {exc}") from exc
    peft_model.merge_and_unload()
    for name, param in model.named_parameters():
        if name in flags:
            param.requires_grad_(flags[name])
