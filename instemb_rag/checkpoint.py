"""The InstEmb checkpoint folder.

    instemb_config.json     EncoderConfig: base model reference + fingerprint, template,
                            look-ahead length, pooling, format version
    lookahead.safetensors   the L look-ahead vectors
    adapted.safetensors     (optional) backbone tensors that training changed, by name
    lora/                   (optional) a peft LoRA adapter over the backbone

The base model's weights are never copied; loading checks the base fingerprint. The config's
``files`` lists every weight file the checkpoint was written with (filled in by
``write_folder_atomically``), so a copy that lost some of them (a wheel without ``lora/``, say)
refuses to load instead of silently embedding with part of the model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from .errors import CheckpointError

FORMAT_VERSION = 1
CONFIG_FILE = "instemb_config.json"
ADAPTED_FILE = "adapted.safetensors"
LORA_DIR = "lora"


class EncoderConfig(BaseModel):
    format_version: int = FORMAT_VERSION
    base_model: str
    base_fingerprint: str
    template: dict
    lookahead_length: int = Field(ge=0)
    pooling: str = "daap"
    max_length: int = Field(default=512, ge=8)
    training: dict = Field(default_factory=dict)  # free-form provenance (config, steps, data)
    # Weight files the checkpoint holds, relative to its folder (e.g. "lora/adapter_model.safetensors").
    # None in checkpoints written before instemb-rag recorded it: those load unchecked.
    files: list[str] | None = None


def is_checkpoint(folder: str | os.PathLike) -> bool:
    return (Path(folder) / CONFIG_FILE).is_file()


def read_config(folder: str | os.PathLike) -> EncoderConfig:
    path = Path(folder) / CONFIG_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path} not found: {folder} is not an InstEmb checkpoint.") from exc
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc}). The checkpoint is damaged; save it again.") from exc
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
            found.extend(sorted(item.relative_to(folder).as_posix() for item in path.rglob("*") if item.is_file()))
    return found


def record_weight_files(folder: str | os.PathLike) -> None:
    """Write the list of weight files present into the folder's config (``files``)."""
    path = Path(folder) / CONFIG_FILE
    raw = json.loads(path.read_text())
    raw["files"] = weight_files(folder)
    path.write_text(json.dumps(raw, indent=2))


def check_complete(folder: str | os.PathLike, config: EncoderConfig) -> None:
    """Refuse a checkpoint that lacks a weight file its config lists."""
    folder = Path(folder)
    missing = [name for name in config.files or () if not (folder / name).is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise CheckpointError(
            f"Checkpoint {folder} is incomplete: {folder / missing[0]} is missing{more}, but "
            f"{CONFIG_FILE} lists it, so the model would load without part of what it learned. "
            "Copy the whole checkpoint folder again (subfolders such as lora/ included); for the "
            "shipped default (instemb_rag/default_checkpoint), reinstall instemb-rag from a complete wheel."
        )


def write_folder_atomically(target: Path, fill) -> None:
    """Call ``fill(staging_folder)`` then swap the staging folder into ``target``.

    A reader never sees a half-written checkpoint; an interrupted save leaves the previous
    checkpoint in place. When ``fill`` wrote a checkpoint config, the weight files it wrote
    are recorded in it (``files``) before the swap.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
    try:
        fill(staging)
        if is_checkpoint(staging):
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


ENCODER_FILES = (CONFIG_FILE, "lookahead.safetensors", ADAPTED_FILE, LORA_DIR)


def export_checkpoint(source: str | os.PathLike, target: str | os.PathLike, **inference_options) -> Path:
    """Copy the encoder part of a checkpoint (no trainer state) to ``target``, atomically.

    ``inference_options`` overrides settings that do not touch weights (``max_length``,
    ``pooling``), e.g. a model trained on 192-token inputs can embed 512-token documents.
    """
    source, target = Path(source), Path(target)
    config = read_config(source)
    check_complete(source, config)
    unknown = set(inference_options) - {"max_length", "pooling"}
    if unknown:
        raise CheckpointError(f"export_checkpoint can override max_length and pooling, not {sorted(unknown)}.")
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

    write_folder_atomically(target, fill)
    return target
