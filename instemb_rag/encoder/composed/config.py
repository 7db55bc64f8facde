"""``instemb_parts.json``: the config of an encoder made of parts (two spaces), and its one reader.

    instemb_parts.json   this config: the parts and the mix weight
    documents_llm/       a symmetric InstEmb checkpoint: the LLM half of every document
    query_llm/           (optional) the query side's LLM: the documents' LLM with a query-side
                         adapter; absent, the documents' LLM reads queries as it is
    tower_head/          (optional) projection.safetensors: the head from the query LLM's pooled
                         state into the sentence encoder's space (the correction of the anchor)
    gate.safetensors     (optional) the per-query mix weight (gate.py)
    document_tower/      (optional) a fine-tuned sentence encoder; else ``document_tower.encoder``
                         names an installed one (``minilm``)

Every part lives inside the folder (a copy of the folder is the whole encoder); the sentence
encoder is the exception when it is an installed teacher, named and checked by fingerprint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import CheckpointError

PARTS_FILE = "instemb_parts.json"
FORMAT_VERSION = 1
DOCUMENTS_LLM_DIR = "documents_llm"
QUERY_LLM_DIR = "query_llm"
TOWER_HEAD_DIR = "tower_head"
TOWER_DIR = "document_tower"


class PartsConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    kind: str = "two_spaces"
    # The sentence encoder's config entry (modules/document_tower.py): encoder, fingerprint, dimension.
    document_tower: dict
    # Whether query_llm/ holds the query side's own LLM (else the documents' LLM reads queries).
    query_llm: bool = False
    # The tower head's Projection config (None: the tower half of a query is the anchor alone).
    tower_head: dict | None = None
    # The gate's config (None: the fixed weight below for every query).
    gate: dict | None = None
    # The LLM space's share of the score where no gate decides and the caller gives none.
    llm_weight: float = Field(default=0.5, gt=0.0, lt=1.0)
    training: dict = Field(default_factory=dict)  # provenance only


def is_composed(folder: str | os.PathLike | None) -> bool:
    return folder is not None and (Path(folder) / PARTS_FILE).is_file()


def llm_checkpoint_of(reference):
    """The symmetric LLM checkpoint a reference means where the LLM itself is meant (its document
    space, its internals, a training start): the ``documents_llm/`` inside a two-space folder, else
    the reference unchanged (a checkpoint, a model folder, a name or None). A string stays a
    string, a path a path."""
    if not is_composed(reference):
        return reference
    inside = Path(reference) / DOCUMENTS_LLM_DIR
    return str(inside) if isinstance(reference, str) else inside


KINDS = ("two_spaces", "instruction_effect")


def parts_kind(folder: str | os.PathLike) -> str:
    """The arrangement a parts folder holds: ``two_spaces`` or ``instruction_effect``."""
    return read_raw_parts(folder).get("kind")


def read_raw_parts(folder: str | os.PathLike) -> dict:
    path = Path(folder) / PARTS_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path} cannot be read ({error}). Copy the whole model folder again.") from None
    if raw.get("format_version") != FORMAT_VERSION or raw.get("kind") not in KINDS:
        raise CheckpointError(
            f"{path}: format {raw.get('format_version')!r}, kind {raw.get('kind')!r}; this version of "
            f"instemb-rag reads format {FORMAT_VERSION}, kinds {', '.join(KINDS)}. Upgrade instemb-rag."
        )
    return raw


def validated(model: type[BaseModel], raw: dict, path: Path):
    try:
        return model(**raw)
    except ValidationError as error:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise CheckpointError(f"{path}: {fields}. The folder is damaged.") from None


def read_parts_config(folder: str | os.PathLike) -> PartsConfig:
    raw = read_raw_parts(folder)
    path = Path(folder) / PARTS_FILE
    if raw["kind"] != "two_spaces":
        raise CheckpointError(f"{path} holds kind {raw['kind']!r}, not a two-space model.")
    return validated(PartsConfig, raw, path)


def write_parts_config(folder: str | os.PathLike, config: BaseModel) -> None:
    (Path(folder) / PARTS_FILE).write_text(json.dumps(config.model_dump(), indent=2) + "\n", encoding="utf-8")
