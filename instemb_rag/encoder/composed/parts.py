"""The parts of an encoder of parts, each with its config, ``save`` and ``load``.

    llm               an InstEmb checkpoint folder (encoder/checkpoint.py): loaded by
                      encoder/load.py (the LLM is built there), saved by its own ``save``
    sentence_encoder  DocumentTower (modules/tower.py): an installed teacher by name, or its own
                      folder copied in (``TOWER_DIR``); its entry is its config
    projection        Projection (modules/projection.py): a head from the LLM's pooled state
    gate              WeightGate (gate.py): the per-query mix weight
    effect_map        EffectMap (effect_map.py): the instruction's effect, mapped

A projection, gate or effect map is a subfolder holding ``config.json`` and its weights file;
an older folder's (legacy.py) carry their config in the entry instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...errors import CheckpointError
from ..modules.projection import Projection
from ..modules.tower import TOWER_DIR, DocumentTower
from .config import PART_CONFIG_FILE, PartEntry, read_raw
from .effect_map import EffectMap
from .gate import WeightGate

__all__ = ["MODULE_PARTS", "load_part", "part_type", "save_part"]

# The parts that are torch modules of their own: type -> class (each has load(folder, config),
# save(folder), get_config_dict() and state_tensors()).
MODULE_PARTS = {"projection": Projection, "gate": WeightGate, "effect_map": EffectMap}


def part_type(part) -> str:
    """The type a loaded part is saved as."""
    if isinstance(part, DocumentTower):
        return "sentence_encoder"
    for kind, cls in MODULE_PARTS.items():
        if isinstance(part, cls):
            return kind
    return "llm"


def load_part(entry: PartEntry, folder: Path, device: str, where: str):
    """A part that is not an LLM, loaded from the model folder ``folder`` on ``device``."""
    if entry.type == "sentence_encoder":
        return DocumentTower.from_config(entry.config or {}, device, folder, where)
    if entry.type not in MODULE_PARTS:
        raise CheckpointError(
            f"{where}: unknown part type {entry.type!r}; this version knows llm, sentence_encoder, {', '.join(MODULE_PARTS)}."
        )
    path = folder / (entry.path or ".")
    config = entry.config if entry.config is not None else read_raw(path / PART_CONFIG_FILE)
    return MODULE_PARTS[entry.type].load(path, config).to(device)


def save_part(name: str, part, staging: Path) -> PartEntry:
    """Write a part that is not an LLM into the staging folder; return its entry."""
    kind = part_type(part)
    if kind == "sentence_encoder":
        part.save(staging)  # a folder of its own is copied to TOWER_DIR; a named teacher is not
        return PartEntry(type=kind, config=part.recorded_config())
    sub = staging / name
    sub.mkdir()
    part.save(sub)
    (sub / PART_CONFIG_FILE).write_text(json.dumps(part.get_config_dict(), indent=2) + "\n", encoding="utf-8")
    return PartEntry(type=kind, path=name)


def part_files(staging: Path, entries: dict[str, PartEntry]) -> list[str]:
    """The files of the saved parts that are not LLM checkpoints (those list their own)."""
    folders = [entry.path for entry in entries.values() if entry.type in MODULE_PARTS and entry.path]
    if any(entry.type == "sentence_encoder" and entry.config.get("encoder") == TOWER_DIR for entry in entries.values()):
        folders.append(TOWER_DIR)
    return sorted(
        path.relative_to(staging).as_posix()
        for name in folders
        for path in (staging / name).rglob("*")
        if path.is_file() and not any(piece.startswith(".") for piece in path.relative_to(staging).parts)
    )
