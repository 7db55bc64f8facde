"""The spec (parts and routes) of any model folder: format 2 read as it is (config.py), a
LLM folder alone as the spec of one LLM part, every older layout through the one
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

__all__ = ["llm_checkpoint_of", "llm_folder_of", "read_spec"]


def read_spec(folder: str | os.PathLike) -> ModelSpec:
    """The parts and routes of any model folder: format 2 and an LLM folder alone read here, every
    older layout converted (legacy.py: the one converter)."""
    path = Path(folder) / PARTS_FILE
    if not path.is_file():
        return llm_folder_spec(Path(folder))
    raw = read_raw(path)
    if raw.get("format_version") != FORMAT_VERSION or not uses_class_paths(raw):
        return legacy.convert(folder, raw)
    return validated(ModelSpec, raw, path)


def llm_folder_spec(folder: Path) -> ModelSpec:
    """An LLM folder alone: a symmetric model (its LLM is the model), or an older two-tower
    LLM folder that names its sentence encoder (converted)."""
    from ..llm_folder import CONFIG_FILE, read_config

    if not (folder / CONFIG_FILE).is_file():
        raise CheckpointError(f"{folder} is not a model folder of instemb-rag (no {CONFIG_FILE} or {PARTS_FILE}).")
    read_config(folder)  # the LLM folder's own checks (JSON, format version, fields) and their messages
    if read_raw(folder / CONFIG_FILE).get(TWO_TOWER_IDENTITY_KEY) is not None:  # older LLM folders wrote null: none
        return legacy.convert(folder)
    return symmetric_spec()


def llm_folder_of(reference):
    """The LLM folder a reference means where the LLM itself is meant: the LLM part inside a
    composed folder (its documents' LLM), else the reference unchanged (an LLM folder, a model
    folder, a name or None). A string stays a string, a path a path."""
    if not is_composed(reference):
        return reference
    inside = Path(reference) / read_spec(reference).llm_path()
    return str(inside) if isinstance(reference, str) else inside


llm_checkpoint_of = llm_folder_of  # alias kept for compatibility (issue 68 names round 2)
checkpoint_spec = llm_folder_spec  # alias kept for compatibility (issue 68 names round 2)
