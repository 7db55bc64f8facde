"""The spec (parts and routes) of any model folder: format 2 read as it is (config.py), every
older layout through the one converter (legacy.py); and the LLM a reference means."""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import CheckpointError
from .config import FORMAT_VERSION, PARTS_FILE, ModelSpec, is_composed, read_raw, validated
from .legacy import convert

__all__ = ["llm_checkpoint_of", "read_spec"]


def read_spec(folder: str | os.PathLike) -> ModelSpec:
    """The parts and routes of any model folder: format 2 read here, every older layout converted
    (legacy.py: the one converter)."""
    path = Path(folder) / PARTS_FILE
    if not path.is_file():
        return convert(folder)
    raw = read_raw(path)
    if raw.get("format_version") != FORMAT_VERSION:
        return convert(folder, raw)
    spec = validated(ModelSpec, raw, path)
    if set(spec.routes) != {"query", "document"}:
        raise CheckpointError(
            f"{path}: routes must be a query route and a document route; found {sorted(spec.routes)}."
        )
    return spec


def llm_checkpoint_of(reference):
    """The symmetric LLM checkpoint a reference means where the LLM itself is meant: the LLM part
    inside a parts folder (its documents' LLM), else the reference unchanged (a checkpoint, a model
    folder, a name or None). A string stays a string, a path a path."""
    if not is_composed(reference):
        return reference
    inside = Path(reference) / read_spec(reference).llm_path()
    return str(inside) if isinstance(reference, str) else inside
