"""Training on from an InstEmb LLM folder (``model.model_name_or_path`` = an LLM folder, such as an
earlier run's ``final/`` or ``checkpoint-<step>/``, or a two-space folder: then its ``documents_llm/``,
the symmetric LLM inside it; ``starting_point``).

A checkpoint written by the next run stores only what *that* run trains: without care,
everything the earlier run learned in the backbone would silently vanish from the new
checkpoints. So:

- the starting LLM folder is loaded with its LoRA adapter unmerged (``encoder.load_llm_folder(merge_lora=False)``)
  and the adapter runs live through peft as the starting value of the new run's adapter (same
  rank, alpha, target modules and layers, or a clear error);
- every tensor the starting LLM folder adapted is written again by the new run, trained or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..encoder.composed.spec import llm_folder_of
from ..encoder.llm_folder import LORA_DIR, check_complete, is_llm_folder, read_config, trained_names
from ..encoder.modules.lora import apply_lora, load_adapter_weights, read_adapter_config
from ..errors import InstEmbError


@dataclass(frozen=True)
class StartingLlmFolder:
    """The LLM folder a run trains on from."""

    folder: Path
    adapted_names: list[str]  # backbone tensors the LLM folder replaced
    lora_folder: Path | None  # its LoRA adapter, run live through peft


def starting_point(model_args) -> str | None:
    """What a run trains from: ``model.model_name_or_path``, or the ``documents_llm/`` inside it when
    it names a two-space folder (encoder/composed/). A run trains the LLM, so a two-space default
    (the recipes' instemb_rag/default_checkpoint) trains on from its symmetric LLM, as a symmetric
    default does from itself. Every reader of a run's start goes through here."""
    return llm_folder_of(model_args.model_name_or_path)


def starting_llm_folder(reference: str | None) -> StartingLlmFolder | None:
    """What the run starts from, when ``reference`` (``starting_point``: a two-space folder is
    already its documents' LLM) is an InstEmb LLM folder."""
    if not reference or not is_llm_folder(reference):
        return None
    folder = Path(reference)
    config = read_config(folder)
    check_complete(folder, config)  # training on from part of an LLM folder would lose the rest
    lora_folder = folder / LORA_DIR
    return StartingLlmFolder(folder, trained_names(folder, config), lora_folder if lora_folder.is_dir() else None)


def check_continuation(
    start: StartingLlmFolder | None, lora_rank: int, lora_alpha: float, target_modules: list[str], layers: list[int]
) -> None:
    """Checked before any work: the run must be able to carry the starting LLM folder's adapter on."""
    if start is None or start.lora_folder is None:
        return
    saved = read_adapter_config(start.lora_folder)
    if lora_rank <= 0 or not layers:
        raise InstEmbError(
            f"{start.folder} was trained with a LoRA adapter (rank {saved.get('r')}) but this run trains "
            f"no LoRA (model.lora_rank={lora_rank}), so its checkpoints would lose that adapter. Continue "
            f"it with model.lora_rank={saved.get('r')} (and the same lora_alpha, target modules and top layers)."
        )
    wanted = {
        "r": lora_rank,
        "lora_alpha": lora_alpha,
        "target_modules": sorted(target_modules),
        "layers_to_transform": sorted(layers),
    }
    found = {
        "r": saved.get("r"),
        "lora_alpha": saved.get("lora_alpha"),
        "target_modules": sorted(saved.get("target_modules") or []),
        "layers_to_transform": sorted(saved.get("layers_to_transform") or []),
    }
    differing = [key for key in wanted if wanted[key] != found[key]]
    if differing:
        detail = ", ".join(f"{key}: LLM folder {found[key]}, this run {wanted[key]}" for key in differing)
        raise InstEmbError(
            f"{start.folder}: its LoRA adapter does not match this run's ({detail}). Use the "
            "LLM folder's LoRA settings (model.lora_rank, lora_alpha, lora_target_modules, "
            "trainable_top_layers) to continue training it."
        )


def attach_starting_adapter(
    encoder,
    start: StartingLlmFolder | None,
    layers: list[int],
    rank: int,
    alpha: float,
    dropout: float,
    target_modules: list[str],
) -> None:
    """Inject this run's LoRA (``check_continuation`` has made sure it has the starting
    LLM folder's shape) and start it at its adapter weights, live, not merged."""
    if start is None or start.lora_folder is None:
        return
    peft_model = apply_lora(encoder.model, layers, rank, alpha, dropout, target_modules)
    load_adapter_weights(peft_model, start.lora_folder)
    encoder.attach_adapter(peft_model)


StartingCheckpoint = StartingLlmFolder  # alias kept for compatibility (issue 68 names round 2)
starting_checkpoint = starting_llm_folder  # alias kept for compatibility (issue 68 names round 2)
