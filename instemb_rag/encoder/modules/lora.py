"""The LoRA adapter of an LLM folder (``lora/``, peft's folder layout), and the two ways to run it.

- merged (inference): W += scale * B @ A straight from the adapter's safetensors, without
  importing peft (seconds on every load of the shipped default); the model stays a plain
  transformers model and inference costs nothing extra;
- live through peft (training): the adapter is injected into the model's own module tree, so
  code that holds the model runs the adapted layers without knowing about peft, and training
  on from a trainer's checkpoint goes on training the adapter it saved.

Nothing here knows about training: ``llm_folder.py`` (inference) and the trainer both use it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ...errors import CheckpointError

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def read_adapter_config(folder: str | os.PathLike) -> dict:
    """The adapter's peft config (rank, alpha, target modules, layers), checked complete."""
    folder = Path(folder)
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        if not (folder / name).is_file():
            raise CheckpointError(f"{folder} lacks {name}: the LoRA adapter of this LLM folder is incomplete.")
    return json.loads((folder / ADAPTER_CONFIG).read_text())


def apply_lora(model, layer_indices: list[int], rank: int, alpha: float, dropout: float, target_modules: list[str]):
    """Inject LoRA layers into ``model`` in place (only in ``layer_indices``); returns the PeftModel."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(target_modules),
        layers_to_transform=list(layer_indices),
        bias="none",
    )
    with peft_wrapping():
        return get_peft_model(model, config)


@contextlib.contextmanager
def peft_wrapping():
    """Around every PeftModel construction (get_peft_model, PeftModel.from_pretrained).

    peft 0.21's PeftModel.__init__ reads ``model.is_gradient_checkpointing``, which transformers
    5.x deprecates with a FutureWarning a user cannot act on; only that warning is silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def load_adapter_weights(peft_model, folder: str | os.PathLike) -> None:
    """Copy a saved adapter's weights into the (same-shaped) adapter injected by ``apply_lora``."""
    from peft import set_peft_model_state_dict

    folder = Path(folder)
    read_adapter_config(folder)
    result = set_peft_model_state_dict(peft_model, load_file(str(folder / ADAPTER_WEIGHTS)))
    if result.unexpected_keys:
        raise CheckpointError(f"{folder}: adapter tensors {result.unexpected_keys[:3]} fit no module of this model.")


def save_adapter(
    peft_model, folder: str | os.PathLike, dtype: torch.dtype = torch.float32, base_reference: str | None = None
) -> None:
    """peft's folder layout (adapter_config.json + adapter_model.safetensors), weights in ``dtype``.

    ``base_reference`` replaces peft's record of the base model's local path (a cache folder on
    the training machine) with the LLM folder's portable base reference.
    """
    from peft import get_peft_model_state_dict

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        name: tensor.detach().to(dtype).cpu().contiguous()
        for name, tensor in get_peft_model_state_dict(peft_model).items()
    }
    save_file(tensors, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    adapter_config = peft_model.peft_config["default"]
    if base_reference is not None:
        adapter_config = copy.copy(adapter_config)
        adapter_config.base_model_name_or_path = base_reference
    adapter_config.save_pretrained(str(folder))


def merge_adapter(model, folder: str | os.PathLike) -> list[str]:
    """Merge the LoRA adapter in ``folder`` into ``model``'s weights: W += scale * B @ A.

    Returns the names of the weights it changed. The result equals peft's ``merge_and_unload``
    (tests check this).
    """
    folder = Path(folder)
    config = read_adapter_config(folder)
    unsupported = [key for key in ("use_dora", "fan_in_fan_out") if config.get(key)]
    if unsupported or config.get("peft_type", "LORA") != "LORA":
        raise CheckpointError(
            f"{folder / ADAPTER_CONFIG}: only plain LoRA adapters can be merged "
            f"(found peft_type={config.get('peft_type')}, {unsupported})."
        )
    rank = int(config["r"])
    scale = config["lora_alpha"] / (math.sqrt(rank) if config.get("use_rslora") else rank)
    tensors = load_file(str(folder / ADAPTER_WEIGHTS))
    params = dict(model.named_parameters())
    changed: list[str] = []
    for key in sorted(k for k in tensors if k.endswith(".lora_A.weight")):
        stem = key[: -len(".lora_A.weight")]
        target = stem.removeprefix("base_model.model.") + ".weight"
        if target not in params or f"{stem}.lora_B.weight" not in tensors:
            raise CheckpointError(
                f"{folder / ADAPTER_WEIGHTS}: adapter tensor {key} has no matching "
                f"weight {target} in the base model (trained on another architecture?)."
            )
        weight = params[target]
        delta = tensors[f"{stem}.lora_B.weight"].float() @ tensors[key].float()
        if delta.shape != weight.shape:
            raise CheckpointError(
                f"{folder / ADAPTER_WEIGHTS}: {stem} gives shape {tuple(delta.shape)}, "
                f"the base weight is {tuple(weight.shape)}."
            )
        with torch.no_grad():
            change = scale * delta.to(weight.device)
            if weight.dtype == torch.float32:
                weight.add_(change)  # the same sum in place: no copy of the (memory-mapped) weight
            else:
                weight.copy_((weight.float() + change).to(weight.dtype))
        changed.append(target)
    return changed


def plain_parameters(model) -> dict[str, torch.nn.Parameter]:
    """The model's parameters under their plain transformers names, adapter tensors left out.

    Inside a module that a live adapter wraps, peft renames the weight to
    ``...base_layer.weight``; LLM folders keep the plain name, so it is mapped back here.
    """
    return {name.replace(".base_layer.", "."): param for name, param in model.named_parameters() if "lora_" not in name}
