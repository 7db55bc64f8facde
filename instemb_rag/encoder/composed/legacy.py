"""The one converter: every model folder written before the current format (config.py: format 3,
types as class paths) read into the same ``ModelSpec``, so loading knows one layout.

    instemb_config.json + ``document_tower`` entry
                                    a two-tower LLM folder: the folder is the query side's LLM
                                    (its head maps into the sentence encoder's space), the
                                    sentence encoder embeds documents; ``query_anchor: true``
                                    anchors each query on the encoder's vector of it
    instemb_parts.json format 1, kind ``two_spaces``
                                    documents_llm/, query_llm/ (optional), tower_head/, gate.safetensors
    instemb_parts.json format 1, kind ``instruction_effect``
                                    documents_llm/, effect_map.safetensors
    instemb_parts.json format 2 with short type names
                                    (``llm``, ``effect``, ...: before types were class paths) the
                                    same parts and routes, each short name its class path
    instemb_parts.json format 2     the sentence encoder was the part ``tower`` (class
                                    ``modules.tower.DocumentTower``), the two-space head
                                    ``tower_head``, the routes ``TowerDocuments``,
                                    ``HalvesDocuments``, ``MixedQueries``: format 3 names each
                                    concept once (``RENAMED_PARTS``, ``RENAMED_CLASSES``)

Every older layout is read into format 2's shape first, then renamed (``current_names``). The
folders load unchanged: nothing is rewritten on disk, and a save writes the current format
(``instemb-rag export OLD NEW`` re-saves a folder without loading its weights). The fingerprint
of a two-tower model keeps its older recipe (the LLM folder config's identity with the tower's
entry under ``TWO_TOWER_IDENTITY_KEY``), so every index built with one searches as it did. The short names
below are read here and nowhere else.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ...errors import CheckpointError
from ...knobs import INSTRUCTION_STRENGTH, LLM_WEIGHT
from ..combine import REFERENCE_INSTRUCTION
from ..llm_folder import CONFIG_FILE, read_config
from .config import (
    DOCUMENTS_LLM_DIR,
    FORMAT_VERSION,
    LLM_TYPE,
    PARTS_FILE,
    QUERY_LLM_DIR,
    SENTENCE_ENCODER_TYPE,
    TOWER_HEAD_DIR,
    TWO_TOWER_IDENTITY_KEY,
    ModelSpec,
    read_raw,
    validated,
)

__all__ = ["PART_TYPES", "RENAMED_CLASSES", "RENAMED_PARTS", "ROUTE_TYPES", "convert"]

ANCHOR_KEY = "query_anchor"
KINDS = ("two_spaces", "instruction_effect")
COMPOSED = "instemb_rag.encoder.composed"
# The short type names of format 2 before class paths, and each one's class (tests check that
# every path here imports the class that reads it today).
PART_TYPES = {
    "llm": LLM_TYPE,
    "sentence_encoder": SENTENCE_ENCODER_TYPE,
    "projection": "instemb_rag.encoder.modules.projection.Projection",
    "gate": f"{COMPOSED}.gate.WeightGate",
    "effect_map": f"{COMPOSED}.effect_map.EffectMap",
}
ROUTE_TYPES = {
    "document": {
        "sentence_encoder": f"{COMPOSED}.routes.SentenceEncoderDocuments",
        "halves": f"{COMPOSED}.routes.TwoSpacesDocuments",
    },
    "query": {
        "llm": f"{COMPOSED}.routes.LLMQueries",
        "anchored": f"{COMPOSED}.routes.AnchoredQueries",
        "mixed": f"{COMPOSED}.routes.TwoSpacesQueries",
        "effect": f"{COMPOSED}.routes.EffectQueries",
    },
}


# Format 3 (issue 62): one name per concept. A format-2 folder's names, and each one's now.
RENAMED_PARTS = {"tower": "sentence_encoder", "tower_head": "sentence_encoder_head"}
RENAMED_CLASSES = {
    "instemb_rag.encoder.modules.tower.DocumentTower": SENTENCE_ENCODER_TYPE,
    f"{COMPOSED}.routes.TowerDocuments": f"{COMPOSED}.routes.SentenceEncoderDocuments",
    f"{COMPOSED}.routes.HalvesDocuments": f"{COMPOSED}.routes.TwoSpacesDocuments",
    f"{COMPOSED}.routes.MixedQueries": f"{COMPOSED}.routes.TwoSpacesQueries",
}


class TwoSpacesV1(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = 1
    kind: str = "two_spaces"
    document_tower: dict
    query_llm: bool = False
    tower_head: dict | None = None
    gate: dict | None = None
    llm_weight: float = Field(default=LLM_WEIGHT.default, gt=LLM_WEIGHT.low, lt=LLM_WEIGHT.high)  # 0, 1: one space
    training: dict = Field(default_factory=dict)


class EffectV1(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = 1
    kind: str = "instruction_effect"
    document_tower: dict
    effect_map: dict | None = None
    instruction_strength: float = Field(
        default=INSTRUCTION_STRENGTH.default, ge=INSTRUCTION_STRENGTH.low, le=INSTRUCTION_STRENGTH.high
    )
    reference_instruction: str = REFERENCE_INSTRUCTION
    training: dict = Field(default_factory=dict)


def convert(folder: str | os.PathLike, raw: dict | None = None) -> ModelSpec:
    """The spec of an older model folder (``raw``: its instemb_parts.json, already read)."""
    folder = Path(folder)
    if raw is None and (folder / PARTS_FILE).is_file():
        raw = read_raw(folder / PARTS_FILE)
    if raw is not None:
        path = folder / PARTS_FILE
        if raw.get("format_version") == FORMAT_VERSION:  # short type names of a current folder
            return validated(ModelSpec, with_class_paths(raw, path), path)
        if raw.get("format_version") == 2:
            return validated(ModelSpec, current_names(with_class_paths(raw, path)), path)
        return ModelSpec(**current_names(with_class_paths(_parts_v1(folder, raw), path)))
    if (folder / CONFIG_FILE).is_file():
        return ModelSpec(**current_names(with_class_paths(_llm_folder(folder), folder / CONFIG_FILE)))
    raise CheckpointError(f"{folder} is not a model folder of instemb-rag (no {CONFIG_FILE} or {PARTS_FILE}).")


def current_names(raw: dict) -> dict:
    """A spec of format 2's names (class paths) in format 3's: the parts renamed, the routes'
    fields that name them, the classes that moved."""
    parts = {
        RENAMED_PARTS.get(name, name): {**entry, "type": RENAMED_CLASSES.get(entry["type"], entry["type"])}
        for name, entry in raw["parts"].items()
    }
    routes = {side: _renamed_route(route) for side, route in raw["routes"].items()}
    return {**raw, "format_version": FORMAT_VERSION, "parts": parts, "routes": routes}


def _renamed_route(route: dict) -> dict:
    renamed = {}
    for field, value in route.items():
        if field == "type":
            value = RENAMED_CLASSES.get(value, value)
        elif isinstance(value, str) and field in ("tower", "head"):  # the fields that name a renamed part
            value = RENAMED_PARTS.get(value, value)
        renamed[RENAMED_PARTS.get(field, field)] = value
    return renamed


def with_class_paths(raw: dict, path: Path, model: type[ModelSpec] | None = None):
    """``raw`` (a spec of short type names) with each part's and route's type its class path; a
    ModelSpec when ``model`` is given. A name that is already a path stays."""
    parts = {
        name: {**entry, "type": _class(PART_TYPES, entry, path, f"part '{name}'")}
        for name, entry in _entries(raw, "parts", path)
    }
    routes = {
        side: {**route, "type": _class(ROUTE_TYPES.get(side, {}), route, path, f"{side} route")}
        for side, route in _entries(raw, "routes", path)
    }
    converted = {**raw, "parts": parts, "routes": routes}
    return model(**converted) if model is not None else converted


def _entries(raw: dict, key: str, path: Path):
    entries = raw.get(key)
    if not isinstance(entries, dict) or not all(isinstance(entry, dict) for entry in entries.values()):
        raise CheckpointError(f"{path}: '{key}' must map names to objects. The folder is damaged.")
    return entries.items()


def _class(names: dict, entry: dict, path: Path, what: str) -> str:
    kind = entry.get("type")
    if isinstance(kind, str) and "." in kind:
        return kind
    if kind not in names:
        raise CheckpointError(
            f"{path}: unknown {what} type {kind!r}; this version of instemb-rag reads {sorted(names)} "
            "or class paths. Upgrade instemb-rag."
        )
    return names[kind]


def _tower_part(entry: dict) -> dict:
    return {"type": "sentence_encoder", "config": {key: value for key, value in entry.items() if key != ANCHOR_KEY}}


def _llm_folder(folder: Path) -> dict:
    """A two-tower LLM folder: instemb_config.json naming its sentence encoder (``TWO_TOWER_IDENTITY_KEY``)."""
    read_config(folder)  # the LLM folder's own checks (JSON, format version, fields) and their messages
    entry = read_raw(folder / CONFIG_FILE).get(TWO_TOWER_IDENTITY_KEY)
    if not isinstance(entry, dict) or not isinstance(entry.get(ANCHOR_KEY, False), bool):
        raise CheckpointError(
            f"{folder / CONFIG_FILE}: {TWO_TOWER_IDENTITY_KEY} must be an object, its {ANCHOR_KEY} true or false."
        )
    query = {"type": "anchored" if entry.get(ANCHOR_KEY) else "llm", "llm": "query_llm", "tower": "tower"}
    return {
        "parts": {"query_llm": {"type": "llm", "path": "."}, "tower": _tower_part(entry)},
        "routes": {"query": query, "document": {"type": "sentence_encoder", "tower": "tower"}},
    }


def _parts_v1(folder: Path, raw: dict) -> dict:
    path = folder / PARTS_FILE
    if raw.get("format_version") != 1 or raw.get("kind") not in KINDS:
        raise CheckpointError(
            f"{path}: format {raw.get('format_version')!r}, kind {raw.get('kind')!r}; this version of "
            f"instemb-rag reads format {FORMAT_VERSION}, and format 1 of kinds {', '.join(KINDS)}. Upgrade instemb-rag."
        )
    parts = {
        "documents_llm": {"type": "llm", "path": DOCUMENTS_LLM_DIR},
        "tower": _tower_part(raw.get(TWO_TOWER_IDENTITY_KEY) or {}),
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
    return {"parts": parts, "routes": {"query": query, "document": document}, "training": old.training}
