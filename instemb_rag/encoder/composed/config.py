"""``instemb_parts.json``: a model folder's parts and routes (format 3), and its one reader.

The shape of sentence-transformers v5's ``modules.json`` + ``Router``: each part is its own
subfolder with its own config, save and load; a query route and a document route name the parts
they run and how their vectors combine (routes.py, the math in encoder/combine.py). Every part's
and route's ``type`` is its class path, imported when the folder loads (class_paths.py: only
classes of the ``instemb_rag`` package), so a new part or route is a class in its own file.

    {"format_version": 3,
     "parts": {"documents_llm": {"type": "instemb_rag.encoder.model.InstEmbEncoder", "path": "documents_llm"},
               "sentence_encoder": {"type": "instemb_rag.encoder.modules.sentence_encoder.SentenceEncoder",
                         "config": {"encoder": "minilm", "fingerprint": "...", "dimension": 384}},
               "effect_map": {"type": "instemb_rag.encoder.composed.effect_map.EffectMap",
                              "path": "effect_map"}, ...},
     "routes": {"query": {"type": "instemb_rag.encoder.composed.routes.EffectQueries",
                          "llm": "documents_llm", "sentence_encoder": "sentence_encoder", "effect_map": "effect_map",
                          "<its knob>": 1.0, "reference_instruction": "..."},
                "document": {"type": "instemb_rag.encoder.composed.routes.TwoSpacesDocuments",
                             "llm": "documents_llm", "sentence_encoder": "sentence_encoder"}},
     "training": {...}, "files": [...]}

A query route records the folder's own value of each query-time knob it takes under the knob's
name (knobs.py; routes.py ``Route.knobs``).

Parts (parts.py): the LLM (``LLM_TYPE``: an InstEmb LLM folder, instemb_config.json and
its weights, loaded by encoder/load.py), the sentence encoder (``SENTENCE_ENCODER_TYPE``: an
installed teacher by name, or its own folder, modules/sentence_encoder.py's ``SENTENCE_ENCODER_DIR``), and any module
part (a torch module with ``load``, ``save``, ``get_config_dict``, ``state_tensors``: the
projection, the gate, the effect map), each a subfolder with ``config.json`` and its weights.
``files`` lists the files of the parts that are not LLM folders (those list their own), so a
copy that lost one refuses to load. Every part lives inside the folder; an installed sentence
encoder is the exception, named and checked by fingerprint.

A symmetric model is an LLM folder alone (``instemb_config.json``: the spec of one LLM part,
spec.py). Older folders (an LLM folder with a ``document_tower`` entry, format 1 of this file,
format 2 with its older names or the short type names of before class paths) are read through the one converter
(legacy.py) into the same ``ModelSpec``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ...errors import CheckpointError

__all__ = [
    "DOCUMENTS_LLM_DIR",
    "FORMAT_VERSION",
    "LLM_TYPE",
    "PARTS_FILE",
    "RERANK_ROUTE",
    "QUERY_LLM_DIR",
    "SENTENCE_ENCODER_TYPE",
    "TOWER_HEAD_DIR",
    "TWO_TOWER_IDENTITY_KEY",
    "ModelSpec",
    "PartEntry",
    "is_composed",
    "read_raw",
    "symmetric_spec",
    "uses_class_paths",
    "validated",
    "write_spec",
]

PARTS_FILE = "instemb_parts.json"
FORMAT_VERSION = 3
DOCUMENTS_LLM_DIR = "documents_llm"
QUERY_LLM_DIR = "query_llm"
TOWER_HEAD_DIR = "tower_head"  # format 1's folder of the two-space head (legacy.py)
PART_CONFIG_FILE = "config.json"  # a projection's, gate's or effect map's own config, in its subfolder

# The two parts encoder/load.py builds itself (the LLM at a precision and device, with its settings;
# the sentence encoder by teacher name or folder and fingerprint), named by their class paths. A
# route of the LLM itself (``type`` LLM_TYPE on both sides) is a symmetric model: the LLM alone.
LLM_TYPE = "instemb_rag.encoder.model.InstEmbEncoder"
SENTENCE_ENCODER_TYPE = "instemb_rag.encoder.modules.sentence_encoder.SentenceEncoder"
# The entry an older two-tower LLM folder's instemb_config.json names its sentence encoder by,
# and the key of that entry in a two-tower model's fingerprint (routes.py LLMQueries), kept.
TWO_TOWER_IDENTITY_KEY = "document_tower"
# The optional third route: the reader that re-orders the first stage's top hits (reader/reranker.py).
RERANK_ROUTE = "rerank"


class PartEntry(BaseModel):
    """One part: its type (a class path), its subfolder (None: none, an installed sentence encoder)
    and its config when the part keeps none of its own in its folder (a sentence encoder; an older
    folder's parts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    path: str | None = None
    config: dict | None = None

    @property
    def is_llm(self) -> bool:
        return self.type == LLM_TYPE

    @property
    def is_sentence_encoder(self) -> bool:
        return self.type == SENTENCE_ENCODER_TYPE


class ModelSpec(BaseModel):
    """What a model folder holds: its parts, its two routes, provenance, the part files it lists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    parts: dict[str, PartEntry]
    routes: dict[str, dict]  # {"query": {...}, "document": {...}}: routes.py
    training: dict = Field(default_factory=dict)  # provenance only
    files: list[str] | None = None

    @field_validator("routes")
    @classmethod
    def _two_routes(cls, routes: dict) -> dict:
        if not {"query", "document"} <= set(routes) or set(routes) - {"query", "document", RERANK_ROUTE}:
            raise ValueError(
                f"must be a query route and a document route (and optionally a {RERANK_ROUTE} route); found {sorted(routes)}"
            )
        return routes

    def reader_parts(self) -> set[str]:
        """The parts only the rerank route reads (reader/reranker.py loads them, on first use): the
        encoder leaves them out, so its vectors and fingerprints are those of the folder without them."""
        rerank = self.routes.get(RERANK_ROUTE)
        if rerank is None:
            return set()
        embedding = {
            value for route in ("query", "document") for value in self.routes[route].values() if isinstance(value, str)
        }
        return {name for name in (rerank.get("reader"),) if isinstance(name, str) and name not in embedding}

    @property
    def is_symmetric(self) -> bool:
        """One LLM embeds queries and documents: the model is that part itself."""
        return self.routes["query"].get("type") == self.routes["document"].get("type") == LLM_TYPE

    def llm_path(self) -> str:
        """The subfolder of the LLM a caller means where it means the LLM (its document space, its
        internals, a training start): the documents' LLM, else the query side's."""
        for name in (self.routes["document"].get("llm"), self.routes["query"].get("llm")):
            if name is not None and self.parts[name].is_llm:
                return self.parts[name].path or "."
        raise CheckpointError("This model has no LLM part.")


def symmetric_spec(path: str = ".", training: dict | None = None) -> ModelSpec:
    """The spec of a symmetric model: one LLM part (an LLM folder), both routes the LLM itself."""
    route = {"type": LLM_TYPE, "llm": "llm"}
    return ModelSpec(
        parts={"llm": PartEntry(type=LLM_TYPE, path=path)},
        routes={"query": route, "document": route},
        training=training or {},
    )


def uses_class_paths(raw: dict) -> bool:
    """Every part and route ``type`` of a read instemb_parts.json is a class path (format 2 as
    written since types are class paths), not a short name of before."""
    parts, routes = raw.get("parts"), raw.get("routes")
    if not isinstance(parts, dict) or not isinstance(routes, dict):
        return False
    entries = [*parts.values(), *routes.values()]
    return all(isinstance(entry, dict) and "." in str(entry.get("type", "")) for entry in entries)


def is_composed(folder: str | os.PathLike | None) -> bool:
    """A composed folder (``instemb_parts.json``), of either format."""
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
