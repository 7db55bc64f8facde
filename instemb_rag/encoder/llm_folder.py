"""The LLM folder (one InstEmb LLM: a symmetric model, or the LLM part of a composed folder), and
the one place that reads and writes it (``load_contents``, ``save``).

    instemb_config.json     EncoderConfig: base model reference + fingerprint, template,
                            look-ahead length, pooling, format version, the names of the
                            trained backbone tensors (``trained``) and of the weight files
    lookahead.safetensors   the L look-ahead vectors
    adapted.safetensors     (optional) backbone tensors that training changed, by name
    lora/                   (optional) a peft LoRA adapter over the backbone (models/lora.py)
    projection.safetensors  (optional) the projection head (modules/projection.py)
    modules.json, config_sentence_transformers.json
                            what makes the folder load as a SentenceTransformer too (st_files.py)

The base model's weights are never copied; loading checks the base fingerprint. The config's
``files`` lists every weight file the folder was written with (filled in by
``write_folder_atomically``), so a copy that lost some of them (a wheel without ``lora/``, say)
refuses to load instead of silently embedding with part of the model.

This module never imports the encoder: ``load_contents`` returns what an LLM folder holds and
``encoder.load_llm_folder`` builds the encoder from them; ``save`` takes any encoder-shaped object.
An LLM folder is a model folder of its own (a symmetric model) or the LLM part of a composed folder
(encoder/composed/, whose instemb_parts.json lists it); older two-tower LLM folders, which named a
sentence encoder here too, load through the converter (composed/legacy.py). A trainer's
``checkpoint-<step>/`` is an LLM folder (or a composed folder) plus the trainer's state.

Before issue 68 (names round 2) this module was encoder/checkpoint.py (kept there as an alias),
``is_llm_folder`` was ``is_checkpoint``, ``export_llm_folder`` ``export_checkpoint``,
``load_contents`` ``load_parts`` and ``LlmFolderContents`` ``CheckpointParts``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import CheckpointError, FingerprintMismatchError
from .st_files import write_sentence_transformers_files

__all__ = [
    "ADAPTED_FILE",
    "CONFIG_FILE",
    "ENCODER_FILES",
    "FORMAT_VERSION",
    "LORA_DIR",
    "NOT_IN_FINGERPRINT",
    "EncoderConfig",
    "LlmFolderContents",
    "blended_projection",
    "check_complete",
    "export_llm_folder",
    "is_llm_folder",
    "load_contents",
    "overlay_adapted",
    "read_config",
    "record_weight_files",
    "save",
    "trained_names",
    "weight_files",
    "write_folder_atomically",
]

FORMAT_VERSION = 1
CONFIG_FILE = "instemb_config.json"
ADAPTED_FILE = "adapted.safetensors"
LORA_DIR = "lora"


class EncoderConfig(BaseModel):
    """What ``instemb_config.json`` holds; frozen: change a copy (``model_copy(update=...)``)."""

    model_config = ConfigDict(frozen=True)

    format_version: int = FORMAT_VERSION
    base_model: str
    base_fingerprint: str
    template: dict
    lookahead_length: int = Field(ge=0)
    pooling: str = "daap"
    max_length: int = Field(default=512, ge=8)
    training: dict = Field(default_factory=dict)  # free-form provenance (config, steps, data)
    # Weight files the LLM folder holds, relative to its folder (e.g. "lora/adapter_model.safetensors").
    # None in folders written before instemb-rag recorded it: those load unchecked.
    files: list[str] | None = None
    # Backbone tensors training changed, saved in adapted.safetensors. None in folders written
    # before instemb-rag recorded it: the file's own tensor names stand in.
    trained: list[str] | None = None
    # The projection head's config (models/projection.py) when the folder has one: the shipped
    # embedding is then the head's output. None (no head) is left out of the fingerprint, so every
    # index built before heads existed keeps its fingerprint.
    projection: dict | None = None


# Fields that do not shape an embedding, so the encoder fingerprint leaves them out (recording
# `files` and `trained` changed no fingerprint of an existing index or embedding cache).
NOT_IN_FINGERPRINT = frozenset({"training", "files", "trained"})


def is_llm_folder(folder: str | os.PathLike) -> bool:
    return (Path(folder) / CONFIG_FILE).is_file()


def read_config(folder: str | os.PathLike) -> EncoderConfig:
    path = Path(folder) / CONFIG_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path} not found: {folder} is not an InstEmb LLM folder.") from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}). The LLM folder is damaged; save it again.") from exc
    version = raw.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has format_version {version}, newer than this instemb-rag understands "
            f"({FORMAT_VERSION}). Upgrade instemb-rag: pip install -U instemb-rag"
        )
    try:
        return EncoderConfig.model_validate(raw)
    except ValidationError as exc:
        raise CheckpointError(f"{path} is invalid: {exc}") from exc


def weight_files(folder: str | os.PathLike) -> list[str]:
    """The encoder weight files present in ``folder`` (look-ahead, adapted tensors, every file under lora/)."""
    folder = Path(folder)
    found: list[str] = []
    for name in ENCODER_FILES[1:]:
        path = folder / name
        if path.is_file():
            found.append(name)
        elif path.is_dir():
            found.extend(
                sorted(
                    item.relative_to(folder).as_posix()
                    for item in path.rglob("*")
                    if item.is_file() and not any(part.startswith(".") for part in item.relative_to(path).parts)
                )
            )
    return found


def record_weight_files(folder: str | os.PathLike) -> None:
    """Write the list of weight files present into the folder's config (``files``)."""
    path = Path(folder) / CONFIG_FILE
    raw = json.loads(path.read_text())
    raw["files"] = weight_files(folder)
    path.write_text(json.dumps(raw, indent=2))


def check_complete(folder: str | os.PathLike, config: EncoderConfig) -> None:
    """Refuse an LLM folder that lacks a weight file its config lists."""
    folder = Path(folder)
    missing = [name for name in config.files or () if not (folder / name).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise CheckpointError(
            f"LLM folder {folder} is incomplete: {folder / missing[0]} is missing{more}, but "
            f"{CONFIG_FILE} lists it, so the model would load without part of what it learned. "
            "Copy the whole LLM folder again (subfolders such as lora/ included); for the "
            "shipped default (instemb_rag/default_checkpoint), reinstall instemb-rag from a complete wheel."
        )


def write_folder_atomically(target: Path, fill) -> None:
    """Call ``fill(staging_folder)`` then swap the staging folder into ``target``.

    A reader never sees a half-written folder; an interrupted save leaves the previous
    folder in place. When ``fill`` wrote an LLM folder's config, the weight files it wrote
    are recorded in it (``files``) before the swap.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
    try:
        fill(staging)
        if is_llm_folder(staging):
            record_weight_files(staging)
        if target.exists():
            retired = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old-"))
            os.replace(target, retired / "old")
            os.replace(staging, target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


ENCODER_FILES = (CONFIG_FILE, "lookahead.safetensors", ADAPTED_FILE, LORA_DIR, "projection.safetensors")


def export_llm_folder(source: str | os.PathLike, target: str | os.PathLike, **inference_options) -> Path:
    """Copy the encoder part of an LLM folder (no trainer state) to ``target``, atomically.

    ``inference_options`` overrides settings that do not touch weights (``max_length``,
    ``pooling``), e.g. a model trained on 192-token inputs can embed 512-token documents.
    ``head_input_weight`` makes the copy a blended view of its projection head
    (models/projection.py): the embedding keeps that share of the pooled geometry. A composed
    folder is exported by composed/export.py, which calls this for each LLM part.
    """
    source, target = Path(source), Path(target)
    config = read_config(source)
    check_complete(source, config)
    head_input_weight = inference_options.pop("head_input_weight", None)
    unknown = set(inference_options) - {"max_length", "pooling"}
    if unknown:
        raise CheckpointError(
            f"export_llm_folder can override max_length, pooling and head_input_weight, not {sorted(unknown)}."
        )
    if head_input_weight is not None:
        inference_options["projection"] = blended_projection(source, config, head_input_weight)
    try:
        config = EncoderConfig.model_validate({**config.model_dump(), **inference_options})
    except ValidationError as exc:
        raise CheckpointError(f"Invalid override for {source}: {exc}") from exc

    def fill(staging: Path) -> None:
        for name in ENCODER_FILES[1:]:
            path = source / name
            if path.is_dir():
                shutil.copytree(path, staging / name)
            elif path.is_file():
                shutil.copy2(path, staging / name)
        (staging / CONFIG_FILE).write_text(json.dumps(config.model_dump(), indent=2))
        write_sentence_transformers_files(staging)

    write_folder_atomically(target, fill)
    return target


def blended_projection(source: Path, config: EncoderConfig, input_weight: float) -> dict:
    """The projection config of a blended view: the same head weights, ``input_weight`` of the
    pooled embedding kept beside the head's output (0 drops the blend)."""
    if not config.projection:
        raise CheckpointError(
            f"{source} has no projection head, so there is nothing to blend; --head-input-weight "
            "applies to LLM folders trained with a sentence-encoder teacher (geometry runs)."
        )
    if not 0.0 <= input_weight < 1.0:
        raise CheckpointError(f"--head-input-weight must lie in [0, 1); got {input_weight}.")
    projection = {key: value for key, value in config.projection.items() if key != "input_weight"}
    # Written only when blended, as Projection.get_config_dict does, so an unblended copy keeps
    # the fingerprint of the folder it came from.
    return {**projection, **({"input_weight": input_weight} if input_weight > 0 else {})}


# ---------------------------------------------------------------------------- load and save
def trained_names(folder: str | os.PathLike, config: EncoderConfig) -> list[str]:
    """The backbone tensors the LLM folder's adapted.safetensors replaces."""
    if config.trained is not None:
        return list(config.trained)
    path = Path(folder) / ADAPTED_FILE
    if not path.is_file():
        return []
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        return sorted(handle.keys())


def overlay_adapted(model, folder: Path) -> None:
    """Copy the LLM folder's adapted tensors over the base model's."""
    import torch
    from safetensors.torch import load_file

    path = folder / ADAPTED_FILE
    if not path.is_file():
        return
    tensors = load_file(str(path))
    own = dict(model.named_parameters())
    unknown = sorted(set(tensors) - set(own))
    if unknown:
        raise CheckpointError(
            f"{path} holds tensors the base model lacks ({', '.join(unknown[:3])}...). "
            "It was trained on a different architecture."
        )
    with torch.no_grad():
        for name, tensor in tensors.items():
            if own[name].shape != tensor.shape:
                raise CheckpointError(
                    f"{path}: tensor {name} has shape {tuple(tensor.shape)}, "
                    f"the base model expects {tuple(own[name].shape)}."
                )
            own[name].copy_(tensor.to(own[name].dtype))


@dataclass
class LlmFolderContents:
    """What an LLM folder holds, loaded: the encoder (encoder.load_llm_folder) is built from these."""

    config: EncoderConfig
    backbone: Any  # backbone.Backbone: the base model with the adapted tensors (and a merged LoRA)
    template: Any  # models.template.PromptTemplate
    lookahead: Any  # models.lookahead.LookAheadTokens
    trained: list[str]  # the backbone tensors a later save writes
    projection: Any = None  # models.projection.Projection, when the folder has a head


def load_contents(
    folder: str | os.PathLike, config: EncoderConfig, device: str, dtype, merge_lora: bool = True
) -> LlmFolderContents:
    """Load what an LLM folder holds, its ``config`` read (and checked complete) by the caller.

    The base model loads on ``device`` in ``dtype`` and must match the config's fingerprint. The
    LoRA adapter is merged into the weights (inference: a plain transformers model, no peft
    import); ``merge_lora=False`` leaves it out (training on from the folder runs it live).
    """
    from . import backbone as backbone_lib
    from .modules.lookahead import LookAheadTokens
    from .modules.lora import merge_adapter
    from .modules.projection import Projection
    from .modules.template import PromptTemplate

    folder = Path(folder)
    loaded = backbone_lib.load_backbone(config.base_model, dtype=dtype, device=device)
    if loaded.fingerprint != config.base_fingerprint:
        raise FingerprintMismatchError(
            f"LLM folder {folder} was trained on base model '{config.base_model}' with weights "
            f"fingerprint {config.base_fingerprint}, but the weights found there have fingerprint "
            f"{loaded.fingerprint}. Point the LLM folder at the original base model "
            f"(edit base_model in {folder / CONFIG_FILE}) or retrain it on this one."
        )
    overlay_adapted(loaded.model, folder)
    trained = trained_names(folder, config)
    if merge_lora and (folder / LORA_DIR).is_dir():
        # The merged weights are what a later save writes, in full (the adapter is gone from them).
        trained = sorted(set(trained) | set(merge_adapter(loaded.model, folder / LORA_DIR)))
    loaded = weights_read_from(loaded, folder, merged_lora=merge_lora)
    lookahead = LookAheadTokens.load(folder)
    if lookahead.length != config.lookahead_length:
        raise CheckpointError(
            f"{folder}: config says {config.lookahead_length} look-ahead tokens but "
            f"lookahead.safetensors holds {lookahead.length}. The LLM folder is damaged."
        )
    return LlmFolderContents(
        config=config,
        backbone=loaded,
        template=PromptTemplate(**config.template),
        lookahead=lookahead,
        trained=trained,
        projection=Projection.load(folder, config.projection) if config.projection else None,
    )


def weights_read_from(loaded, folder: Path, merged_lora: bool):
    """The backbone whose weights are now its base files' with this LLM folder's tensors over them
    (adapted, a merged LoRA): its origin names both (weights_origin.py). A LoRA left live
    (training) gives none: its weights are the trainer's to change."""
    import dataclasses

    from .weights_origin import WeightsOrigin

    if loaded.origin is None or (not merged_lora and (folder / LORA_DIR).is_dir()):
        return dataclasses.replace(loaded, origin=None)
    files = [*loaded.origin.files, *(folder / name for name in weight_files(folder))]
    how = {**dict(loaded.origin.how), "merged_lora": merged_lora}
    return dataclasses.replace(loaded, origin=WeightsOrigin.taken(loaded.model, files, **how))


def save(
    encoder,
    folder: str | os.PathLike,
    trained: Iterable[str] | None = None,
    dtype=None,
    also: Callable[[Path], None] | None = None,
) -> None:
    """Write ``encoder`` as an LLM folder, atomically.

    ``trained``: the backbone tensors to store (default: the encoder's own ``trained_names``),
    in ``dtype`` (default float32); a live LoRA adapter goes to lora/ in the same dtype.
    ``also(staging)`` writes more files into the same folder before it is swapped in (the
    trainer's state), so a trainer's checkpoint and its state appear together or not at all.
    """
    import torch
    from safetensors.torch import save_file

    from . import quantize
    from .modules.lora import plain_parameters, save_adapter

    quantize.refuse_training(encoder.precision, "saved as an LLM folder")
    dtype = dtype or torch.float32
    names = sorted(encoder.trained_names if trained is None else set(trained))
    params = plain_parameters(encoder.model)
    missing = [name for name in names if name not in params]
    if missing:
        raise CheckpointError(f"Cannot save {missing[0]}: the model has no such tensor.")
    tensors = {name: params[name].detach().to(dtype).cpu().contiguous() for name in names}
    config = encoder.config.model_copy(update={"trained": names})

    def fill(staging: Path) -> None:
        (staging / CONFIG_FILE).write_text(json.dumps(config.model_dump(), indent=2))
        encoder.lookahead.save(staging)
        if encoder.projection is not None:
            encoder.projection.save(staging)
        if tensors:
            save_file(tensors, str(staging / ADAPTED_FILE))
        if encoder.adapter is not None:
            save_adapter(encoder.adapter, staging / LORA_DIR, dtype, base_reference=encoder.backbone.reference)
        write_sentence_transformers_files(staging)
        if also is not None:
            also(staging)

    write_folder_atomically(Path(folder), fill)
