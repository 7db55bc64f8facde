"""``instemb_parts.json``: a model folder's parts and routes (format 2), and its one reader.

The shape of sentence-transformers v5's ``modules.json`` + ``Router``: each part is its own
subfolder with its own config, save and load; a query route and a document route name the parts
they run and how their vectors combine (routes.py, the math in encoder/combine.py).

    {"format_version": 2,
     "parts": {"documents_llm": {"type": "llm", "path": "documents_llm"},
               "tower": {"type": "sentence_encoder",
                         "config": {"encoder": "minilm", "fingerprint": "...", "dimension": 384}},
               "tower_head": {"type": "projection", "path": "tower_head"}, ...},
     "routes": {"query": {"type": "mixed", "llm": "query_llm", "tower": "tower", "head": "tower_head",
                          "gate": null, "llm_weight": 0.5},
                "document": {"type": "halves", "llm": "documents_llm", "tower": "tower"}},
     "training": {...}, "files": [...]}

Part types (parts.py): ``llm`` (an InstEmb checkpoint folder: instemb_config.json and its weights),
``sentence_encoder`` (an installed teacher by name, or its own folder, modules/tower.py's ``TOWER_DIR``),
``projection``, ``gate``, ``effect_map`` (each a subfolder with ``config.json`` and its weights).
``files`` lists the files of the parts that are not LLM checkpoints (those list their own), so a
copy that lost one refuses to load. Every part lives inside the folder; an installed sentence
encoder is the exception, named and checked by fingerprint.

Older folders (a checkpoint's ``instemb_config.json`` with or without a document tower, and
format 1 of this file, kinds ``two_spaces`` and ``instruction_effect``) are read through the one
converter (legacy.py) into the same ``ModelSpec``; a symmetric checkpoint is the spec of one part
(spec.py: ``read_spec`` reads any folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import CheckpointError

__all__ = [
    "DOCUMENTS_LLM_DIR",
    "FORMAT_VERSION",
    "PARTS_FILE",
    "QUERY_LLM_DIR",
    "TOWER_HEAD_DIR",
    "ModelSpec",
    "PartEntry",
    "is_composed",
    "read_raw",
    "validated",
    "write_spec",
]

PARTS_FILE = "instemb_parts.json"
FORMAT_VERSION = 2
DOCUMENTS_LLM_DIR = "documents_llm"
QUERY_LLM_DIR = "query_llm"
TOWER_HEAD_DIR = "tower_head"
PART_CONFIG_FILE = "config.json"  # a projection's, gate's or effect map's own config, in its subfolder


class PartEntry(BaseModel):
    """One part: its type, its subfolder (None: none, an installed sentence encoder) and its config
    when the part keeps none of its own in its folder (a sentence encoder; an older folder's parts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    path: str | None = None
    config: dict | None = None


class ModelSpec(BaseModel):
    """What a model folder holds: its parts, its two routes, provenance, the part files it lists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    parts: dict[str, PartEntry]
    routes: dict[str, dict]  # {"query": {...}, "document": {...}}: routes.py
    training: dict = Field(default_factory=dict)  # provenance only
    files: list[str] | None = None

    @property
    def is_symmetric(self) -> bool:
        """One LLM embeds queries and documents: the model is that part itself."""
        return self.routes["query"].get("type") == self.routes["document"].get("type") == "llm"

    def llm_path(self) -> str:
        """The subfolder of the LLM a caller means where it means the LLM (its document space, its
        internals, a training start): the documents' LLM, else the query side's."""
        for name in (self.routes["document"].get("llm"), self.routes["query"].get("llm")):
            if name is not None and self.parts[name].type == "llm":
                return self.parts[name].path or "."
        raise CheckpointError("This model has no LLM part.")


def is_composed(folder: str | os.PathLike | None) -> bool:
    """A parts folder (``instemb_parts.json``), of either format."""
    return folder is not None and (Path(folder) / PARTS_FILE).is_file()


def validated(model: type[BaseModel], raw: dict, path: Path):
    try:
        return model(**raw)
    except ValidationError as error:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise CheckpointError(f"{path}: {fields}. The folder is damaged.") from None


def read_raw(path: Path) -> dict:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path} cannot be read ({error}). Copy the whole model folder again.") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} does not hold a JSON object. Copy the whole model folder again.")
    return raw


def write_spec(folder: str | os.PathLike, spec: ModelSpec) -> None:
    (Path(folder) / PARTS_FILE).write_text(json.dumps(spec.model_dump(), indent=2) + "\n", encoding="utf-8")
