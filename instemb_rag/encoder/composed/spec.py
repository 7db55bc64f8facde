"""The spec (parts and routes) of any model folder: format 2 read as it is (config.py), a
checkpoint folder alone as the spec of one LLM part, every older layout through the one
converter (legacy.py); and the LLM a reference means."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import CheckpointError
from . import legacy
from .config import (
    FORMAT_VERSION,
    PARTS_FILE,
    TWO_TOWER_IDENTITY_KEY,
    ModelSpec,
    is_composed,
    read_raw,
    symmetric_spec,
    uses_class_paths,
    validated,
)

__all__ = ["llm_checkpoint_of", "read_spec"]


def read_spec(folder: str | os.PathLike) -> ModelSpec:
    """The parts and routes of any model folder: format 2 and a checkpoint alone read here, every
    older layout converted (legacy.py: the one converter)."""
    path = Path(folder) / PARTS_FILE
    if not path.is_file():
        return checkpoint_spec(Path(folder))
    raw = read_raw(path)
    if raw.get("format_version") != FORMAT_VERSION or not uses_class_paths(raw):
        return legacy.convert(folder, raw)
    return validated(ModelSpec, raw, path)


def checkpoint_spec(folder: Path) -> ModelSpec:
    """A checkpoint folder alone: a symmetric model (its LLM is the model), or an older two-tower
    checkpoint that names its sentence encoder (converted)."""
    from ..checkpoint import CONFIG_FILE, read_config

    if not (folder / CONFIG_FILE).is_file():
        raise CheckpointError(f"{folder} is not a model folder of instemb-rag (no {CONFIG_FILE} or {PARTS_FILE}).")
    read_config(folder)  # the checkpoint's own checks (JSON, format version, fields) and their messages
    if read_raw(folder / CONFIG_FILE).get(TWO_TOWER_IDENTITY_KEY) is not None:  # older checkpoints wrote null: none
        return legacy.convert(folder)
    return symmetric_spec()


def llm_checkpoint_of(reference):
    """The symmetric LLM checkpoint a reference means where the LLM itself is meant: the LLM part
    inside a composed folder (its documents' LLM), else the reference unchanged (a checkpoint, a model
    folder, a name or None). A string stays a string, a path a path."""
    if not is_composed(reference):
        return reference
    inside = Path(reference) / read_spec(reference).llm_path()
    return str(inside) if isinstance(reference, str) else inside
