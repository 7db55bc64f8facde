"""The parts of an encoder of parts, each recorded by its class path (config.py ``PartEntry.type``).

    the LLM           InstEmbEncoder (``LLM_TYPE``): an InstEmb LLM folder
                      (encoder/llm_folder.py), loaded by encoder/references.py (the LLM is built there:
                      precision, device, settings), saved by its own ``save``
    the sentence encoder
                      SentenceEncoder (``SENTENCE_ENCODER_TYPE``, modules/sentence_encoder.py): an installed
                      teacher by name, or its own folder copied in (``SENTENCE_ENCODER_DIR``); its entry is
                      its config
    module parts      any torch module class with the ``ModulePart`` methods, imported by its
                      class path (class_paths.py): Projection (modules/projection.py, a head from
                      the LLM's pooled state), WeightGate (gate.py, the per-query weight),
                      EffectMap (effect_map.py, the instruction's effect, mapped). A new part is
                      a class in a file of its own: nothing here lists it.

A module part is a subfolder holding ``config.json`` and its weights; an older folder's
(legacy.py) carry their config in the entry instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol, runtime_checkable

from ...errors import CheckpointError
from ..modules.sentence_encoder import SENTENCE_ENCODER_DIR, SentenceEncoder
from .class_paths import class_path, resolve_class
from .config import LLM_TYPE, PART_CONFIG_FILE, SENTENCE_ENCODER_TYPE, PartEntry, read_raw

__all__ = ["ModulePart", "is_llm_part", "is_module_part", "load_part", "part_type", "save_part"]


@runtime_checkable
class ModulePart(Protocol):
    """What a module part's class provides (a torch module: ``to``, ``train``, ``parameters``)."""

    @classmethod
    def load(cls, folder, config: dict): ...  # the part saved in ``folder``, built from ``config``

    def save(self, folder) -> None: ...  # its weights into ``folder``

    def get_config_dict(self) -> dict: ...  # what ``load`` takes back (written as config.json)

    def state_tensors(self) -> dict: ...  # its tensors by name (fingerprints hash them)


def is_module_part(part) -> bool:
    return isinstance(part, ModulePart)


def is_llm_part(part) -> bool:
    """An LLM part: neither the sentence encoder nor a module part."""
    return not isinstance(part, SentenceEncoder) and not is_module_part(part)


def part_type(part) -> str:
    """The type (class path) a loaded part is saved as."""
    if isinstance(part, SentenceEncoder):
        return SENTENCE_ENCODER_TYPE
    return class_path(type(part)) if is_module_part(part) else LLM_TYPE


def module_class(entry: PartEntry, where: str, name: str) -> type:
    """The class of a module part, imported by its path and checked to be one."""
    cls = resolve_class(entry.type, where, f"part '{name}'")
    if not all(callable(getattr(cls, method, None)) for method in ("load", "save", "get_config_dict", "state_tensors")):
        raise CheckpointError(
            f"{where}: part '{name}' names {entry.type!r}, which is not a part class (load, save, "
            "get_config_dict and state_tensors). The folder is damaged: copy the whole model folder again."
        )
    return cls


def load_part(entry: PartEntry, folder: Path, device: str, where: str, name: str = ""):
    """A part that is not an LLM, loaded from the model folder ``folder`` on ``device``."""
    if entry.is_sentence_encoder:
        return SentenceEncoder.from_config(entry.config or {}, device, folder, where)
    cls = module_class(entry, where, name)
    path = folder / (entry.path or ".")
    config = entry.config if entry.config is not None else read_raw(path / PART_CONFIG_FILE)
    return cls.load(path, config).to(device)


def save_part(name: str, part, staging: Path) -> PartEntry:
    """Write a part that is not an LLM into the staging folder; return its entry."""
    kind = part_type(part)
    if kind == SENTENCE_ENCODER_TYPE:
        part.save(staging)  # a folder of its own is copied to TOWER_DIR; a named teacher is not
        return PartEntry(type=kind, config=part.recorded_config())
    sub = staging / name
    sub.mkdir()
    part.save(sub)
    (sub / PART_CONFIG_FILE).write_text(json.dumps(part.get_config_dict(), indent=2) + "\n", encoding="utf-8")
    return PartEntry(type=kind, path=name)


def part_files(staging: Path, entries: dict[str, PartEntry]) -> list[str]:
    """The files of the saved parts that are not LLM folders (those list their own)."""
    folders = [
        entry.path for entry in entries.values() if not entry.is_llm and not entry.is_sentence_encoder and entry.path
    ]
    if any(
        entry.is_sentence_encoder and entry.config.get("encoder") == SENTENCE_ENCODER_DIR for entry in entries.values()
    ):
        folders.append(SENTENCE_ENCODER_DIR)
    return sorted(
        path.relative_to(staging).as_posix()
        for name in folders
        for path in (staging / name).rglob("*")
        if path.is_file() and not any(piece.startswith(".") for piece in path.relative_to(staging).parts)
    )
