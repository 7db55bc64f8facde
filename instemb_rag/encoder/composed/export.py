"""``instemb-rag export``: a copy of any model folder with new inference settings, no trainer state.

export_model(source, target, max_length=, pooling=, head_input_weight=)
    every LLM part exported with those settings (llm_folder.export_llm_folder: a symmetric
    model's LLM folder is exactly that), every other part copied; the copy is written in format 2
export_model(source, target, sentence_encoder={"encoder": ..., "fingerprint": ..., "dimension": ...})
    the copy is two-tower over that sentence encoder: the source's LLM (its head trained
    into the encoder's space) embeds queries, the sentence encoder documents. An anchored
    source keeps its anchor unless the entry sets ``query_anchor``. A folder encoder is
    checked by fingerprint and copied in (``SENTENCE_ENCODER_DIR``).

With no options it re-saves a folder of any older layout in the current format (legacy.py reads
it), its weight files copied byte for byte: ``instemb-rag export OLD NEW``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...errors import CheckpointError, FingerprintMismatchError
from ..llm_folder import export_llm_folder, read_config, write_folder_atomically
from ..modules.sentence_encoder import SENTENCE_ENCODER_DIR
from ..st_files import write_sentence_transformers_files
from .class_paths import class_path
from .config import LLM_TYPE, SENTENCE_ENCODER_TYPE, ModelSpec, PartEntry, write_spec
from .encoder import LLM_DIRS
from .parts import load_part, part_files, save_part
from .routes import AnchoredQueries, LLMQueries, SentenceEncoderDocuments
from .spec import read_spec

__all__ = ["export_model"]

LLM_OPTIONS = {"max_length", "pooling", "head_input_weight"}


def export_model(source: str | os.PathLike, target: str | os.PathLike, **options) -> Path:
    """Copy the model in ``source`` to ``target`` atomically (see the module docstring)."""
    source, target = Path(source), Path(target)
    sentence_encoder = options.pop("sentence_encoder", None)
    unknown = set(options) - LLM_OPTIONS
    if unknown:
        raise CheckpointError(f"export can set {sorted(LLM_OPTIONS)} and sentence encoder, not {sorted(unknown)}.")
    spec = read_spec(source)
    if spec.is_symmetric and sentence_encoder is None:
        return export_llm_folder(source / spec.llm_path(), target, **options)
    if sentence_encoder is not None:
        spec = with_sentence_encoder(spec, sentence_encoder, source)
    head_checked = sentence_encoder is not None
    where = f"{source}"

    def fill(staging: Path) -> None:
        entries, exported = {}, {}
        for name, entry in spec.parts.items():
            if entry.is_llm:
                path = entry.path or "."
                if path not in exported:
                    exported[path] = LLM_DIRS.get(name, name)
                    export_llm_folder(source / path, staging / exported[path], **options)
                    if head_checked:
                        check_head(staging / exported[path], spec)
                entries[name] = PartEntry(type=LLM_TYPE, path=exported[path])
            elif entry.is_sentence_encoder:
                entries[name] = copy_sentence_encoder(entry, source, staging)
            else:  # a module part: loaded by its class and saved as a part is
                entries[name] = save_part(name, load_part(entry, source, "cpu", where, name), staging)
        write_spec(
            staging,
            ModelSpec(parts=entries, routes=spec.routes, training=spec.training, files=part_files(staging, entries)),
        )
        write_sentence_transformers_files(staging)

    write_folder_atomically(target, fill)
    return target


def with_sentence_encoder(spec: ModelSpec, entry: dict, source: Path) -> ModelSpec:
    """The spec of a two-tower copy of ``spec``'s LLM over the sentence encoder ``entry``."""
    query = spec.routes["query"]
    two_tower = {class_path(LLMQueries), class_path(AnchoredQueries)}
    if not spec.is_symmetric and query.get("type") not in two_tower:
        raise CheckpointError(f"{source} is not the LLM folder of one LLM: a sentence encoder is attached to one.")
    anchored = entry.get("query_anchor", query.get("type") == class_path(AnchoredQueries))
    llm = spec.parts[query["llm"]]
    config = {key: value for key, value in entry.items() if key != "query_anchor"}
    route = AnchoredQueries() if anchored else LLMQueries()
    return ModelSpec(
        parts={"query_llm": llm, "sentence_encoder": PartEntry(type=SENTENCE_ENCODER_TYPE, config=config)},
        routes={"query": route.config(), "document": SentenceEncoderDocuments().config()},
        training=spec.training,
    )


def check_head(llm_folder: Path, spec: ModelSpec) -> None:
    """A two-tower LLM needs an unblended head into the sentence encoder's space (its queries' space)."""
    head = read_config(llm_folder).projection or {}
    sentence_encoder = spec.parts["sentence_encoder"].config
    dimension = sentence_encoder["dimension"]
    if head.get("out_features") != dimension or head.get("input_weight"):
        raise CheckpointError(
            f"This model cannot take the sentence encoder '{sentence_encoder['encoder']}': its queries must land in "
            f"that {dimension}-dimensional space, so it needs an unblended projection head with {dimension} "
            f"outputs (it has {'none' if not head else head}). Train it with that sentence encoder as teacher."
        )


def copy_sentence_encoder(entry: PartEntry, source: Path, staging: Path) -> PartEntry:
    """A named sentence encoder stays named. A folder (absolute, or relative: inside ``source``) is
    copied in and recorded as ``SENTENCE_ENCODER_DIR``, so no absolute path stays in a config or a
    fingerprint; its fingerprint is checked first, so a copy never names an encoder it does not load."""
    from ...teachers.fingerprint import folder_fingerprint
    from ...teachers.registry import TEACHERS

    config = dict(entry.config or {})
    reference = config.get("encoder")
    if reference in TEACHERS:
        return PartEntry(type=SENTENCE_ENCODER_TYPE, config=config)
    folder = Path(reference).expanduser()
    folder = folder if folder.is_absolute() else source / folder
    if not (folder / "modules.json").is_file():
        raise CheckpointError(
            f"Sentence encoder '{reference}' of {source} is not a sentence-transformers folder ({folder}): "
            "give the folder it was trained against (or a teacher name such as minilm)."
        )
    if folder_fingerprint(folder) != config.get("fingerprint"):
        raise FingerprintMismatchError(
            f"Sentence encoder folder {folder} has fingerprint {folder_fingerprint(folder)[:16]}, not the "
            f"{str(config.get('fingerprint'))[:16]} the config names: it is another sentence encoder."
        )
    shutil.copytree(folder, staging / SENTENCE_ENCODER_DIR, ignore=shutil.ignore_patterns(".*"))
    return PartEntry(type=SENTENCE_ENCODER_TYPE, config={**config, "encoder": SENTENCE_ENCODER_DIR})
