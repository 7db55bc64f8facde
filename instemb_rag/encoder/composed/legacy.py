"""The one converter: every model folder written before the parts-and-routes format (config.py,
format 2) read into the same ``ModelSpec``, so loading knows one layout.

    instemb_config.json             a symmetric checkpoint: one LLM part, both routes through it
    instemb_config.json + ``document_tower`` entry
                                    a two-tower checkpoint: the checkpoint is the query side's LLM
                                    (its head maps into the sentence encoder's space), the
                                    sentence encoder embeds documents; ``query_anchor: true``
                                    anchors each query on the encoder's vector of it
    instemb_parts.json format 1, kind ``two_spaces``
                                    documents_llm/, query_llm/ (optional), tower_head/, gate.safetensors
    instemb_parts.json format 1, kind ``instruction_effect``
                                    documents_llm/, effect_map.safetensors

The folders load unchanged: nothing is rewritten on disk, and a save writes format 2. The
fingerprint of a two-tower model keeps its older recipe (the checkpoint config's identity with
the tower's entry under ``TOWER_KEY``), so every index built with one searches as it did.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ...errors import CheckpointError
from ..checkpoint import CONFIG_FILE, read_config
from ..combine import DEFAULT_INSTRUCTION_STRENGTH, MAX_INSTRUCTION_STRENGTH, REFERENCE_INSTRUCTION
from .config import DOCUMENTS_LLM_DIR, PARTS_FILE, QUERY_LLM_DIR, TOWER_HEAD_DIR, ModelSpec, read_raw, validated

__all__ = ["TOWER_KEY", "convert"]

# The entry an older two-tower checkpoint's instemb_config.json names its sentence encoder by,
# and the key of that entry in a two-tower model's fingerprint (routes.py).
TOWER_KEY = "document_tower"
ANCHOR_KEY = "query_anchor"
KINDS = ("two_spaces", "instruction_effect")


class TwoSpacesV1(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = 1
    kind: str = "two_spaces"
    document_tower: dict
    query_llm: bool = False
    tower_head: dict | None = None
    gate: dict | None = None
    llm_weight: float = Field(default=0.5, gt=0.0, lt=1.0)
    training: dict = Field(default_factory=dict)


class EffectV1(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = 1
    kind: str = "instruction_effect"
    document_tower: dict
    effect_map: dict | None = None
    instruction_strength: float = Field(default=DEFAULT_INSTRUCTION_STRENGTH, ge=0.0, le=MAX_INSTRUCTION_STRENGTH)
    reference_instruction: str = REFERENCE_INSTRUCTION
    training: dict = Field(default_factory=dict)


def convert(folder: str | os.PathLike, raw: dict | None = None) -> ModelSpec:
    """The spec of an older model folder (``raw``: its instemb_parts.json, already read)."""
    folder = Path(folder)
    if raw is not None or (folder / PARTS_FILE).is_file():
        return _parts_v1(folder, raw if raw is not None else read_raw(folder / PARTS_FILE))
    if (folder / CONFIG_FILE).is_file():
        return _checkpoint(folder)
    raise CheckpointError(f"{folder} is not a model folder of instemb-rag (no {CONFIG_FILE} or {PARTS_FILE}).")


def _tower_part(entry: dict) -> dict:
    return {"type": "sentence_encoder", "config": {key: value for key, value in entry.items() if key != ANCHOR_KEY}}


def _checkpoint(folder: Path) -> ModelSpec:
    read_config(folder)  # the checkpoint's own checks (JSON, format version, fields) and their messages
    entry = read_raw(folder / CONFIG_FILE).get(TOWER_KEY)
    if entry is None:
        route = {"type": "llm", "llm": "llm"}
        return ModelSpec(parts={"llm": {"type": "llm", "path": "."}}, routes={"query": route, "document": route})
    if not isinstance(entry, dict) or not isinstance(entry.get(ANCHOR_KEY, False), bool):
        raise CheckpointError(f"{folder / CONFIG_FILE}: {TOWER_KEY} must be an object, its {ANCHOR_KEY} true or false.")
    query = {"type": "anchored" if entry.get(ANCHOR_KEY) else "llm", "llm": "query_llm", "tower": "tower"}
    return ModelSpec(
        parts={"query_llm": {"type": "llm", "path": "."}, "tower": _tower_part(entry)},
        routes={"query": query, "document": {"type": "sentence_encoder", "tower": "tower"}},
    )


def _parts_v1(folder: Path, raw: dict) -> ModelSpec:
    path = folder / PARTS_FILE
    if raw.get("format_version") != 1 or raw.get("kind") not in KINDS:
        raise CheckpointError(
            f"{path}: format {raw.get('format_version')!r}, kind {raw.get('kind')!r}; this version of "
            f"instemb-rag reads format 2, and format 1 of kinds {', '.join(KINDS)}. Upgrade instemb-rag."
        )
    parts = {
        "documents_llm": {"type": "llm", "path": DOCUMENTS_LLM_DIR},
        "tower": _tower_part(raw.get(TOWER_KEY) or {}),
    }
    document = {"type": "halves", "llm": "documents_llm", "tower": "tower"}
    if raw["kind"] == "two_spaces":
        old = validated(TwoSpacesV1, raw, path)
        if old.query_llm:
            parts["query_llm"] = {"type": "llm", "path": QUERY_LLM_DIR}
        if old.tower_head is not None:
            parts["tower_head"] = {"type": "projection", "path": TOWER_HEAD_DIR, "config": old.tower_head}
        if old.gate is not None:
            parts["gate"] = {"type": "gate", "path": ".", "config": old.gate}
        query = {
            "type": "mixed",
            "llm": "query_llm" if old.query_llm else "documents_llm",
            "tower": "tower",
            "head": "tower_head" if old.tower_head is not None else None,
            "gate": "gate" if old.gate is not None else None,
            "llm_weight": old.llm_weight,
        }
    else:
        old = validated(EffectV1, raw, path)
        if old.effect_map is not None:
            parts["effect_map"] = {"type": "effect_map", "path": ".", "config": old.effect_map}
        query = {
            "type": "effect",
            "llm": "documents_llm",
            "tower": "tower",
            "effect_map": "effect_map" if old.effect_map is not None else None,
            "instruction_strength": old.instruction_strength,
            "reference_instruction": old.reference_instruction,
        }
    return ModelSpec(parts=parts, routes={"query": query, "document": document}, training=old.training)
