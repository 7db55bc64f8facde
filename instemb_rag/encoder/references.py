"""A model reference to the encoder it names, the LLM parts built by a class handed in.

``InstEmbEncoder.from_pretrained`` (model.py) is the loader of every arrangement, and the
loader builds InstEmbEncoders: so the class comes in as ``llm_class`` (from_pretrained passes
``cls``, load.py passes InstEmbEncoder) and this module never imports model.py. The
references it resolves, and load.py's public functions over them, are listed in load.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from ..errors import CheckpointError
from . import llm_folder, quantize
from .composed.concat import ConcatenatedEncoder, is_concatenated_reference
from .composed.config import is_composed
from .composed.encoder import ComposedEncoder
from .composed.parts import load_part
from .composed.pasted import PastedInstructionEncoder, is_pasted_reference
from .composed.routes import route_from_config
from .composed.spec import read_spec
from .device import default_dtype, resolve_device
from .llm_folder import is_llm_folder
from .settings import EncoderSettings

__all__ = ["check_listed_files", "is_composite_reference", "is_model_folder", "llm_from_folder", "load_folder"]
__all__ += ["llm_from_checkpoint", "load_reference"]

DEFAULT = "default"


def is_model_folder(folder: str | os.PathLike | None) -> bool:
    """A model folder of this project (an LLM folder or a composed folder, any layout)."""
    return folder is not None and (is_llm_folder(folder) or is_composed(folder))


def is_composite_reference(reference) -> bool:
    """``concat:`` or ``pasted:``: a model made here of other models (no LLM of its own to compile)."""
    return reference is not None and (is_concatenated_reference(str(reference)) or is_pasted_reference(str(reference)))


def load_reference(
    llm_class: type,
    reference: str | os.PathLike | None,
    shipped: Path,
    device: str = "auto",
    pooling: str | None = None,
    lookahead_length: int | None = None,
    max_length: int | None = None,
    precision: str = quantize.DEFAULT_PRECISION,
    part_loader: Callable[[str | None], object] | None = None,
):
    """The model ``reference`` names (load.py's docstring lists them); ``shipped`` is the shipped
    default's folder (None and "default" name it while it is a model folder). ``pooling``,
    ``lookahead_length`` and ``max_length`` override an LLM's own settings (None: its own);
    ``part_loader`` loads each side of a ``concat:`` reference (default: this, at this device and
    precision)."""
    settings = {"pooling": pooling, "lookahead_length": lookahead_length, "max_length": max_length}
    if reference is not None and is_concatenated_reference(str(reference)):
        loader = part_loader or (lambda part: load_reference(llm_class, part, shipped, device, precision=precision))
        return ConcatenatedEncoder.load(str(reference), loader)
    if reference is not None and is_pasted_reference(str(reference)):
        return PastedInstructionEncoder.load(str(reference), device="cpu" if device == "auto" else device)
    if reference is None or str(reference) == DEFAULT:
        reference = shipped if is_model_folder(shipped) else None  # None: the untrained default backbone
    if is_model_folder(reference):
        return load_folder(llm_class, reference, device, precision, **settings)
    # The class's own default look-ahead length where none is asked for.
    length = {} if lookahead_length is None else {"lookahead_length": lookahead_length}
    return llm_class.from_backbone(
        reference, pooling=pooling or "daap", max_length=max_length or 512, device=device, precision=precision, **length
    )


def check_listed_files(folder: Path, files: list[str] | None) -> None:
    """Refuse a composed folder that lacks a part file it lists (as llm_folder.check_complete does)."""
    missing = [name for name in files or () if not (folder / name).is_file()]
    if missing:
        raise CheckpointError(
            f"Model folder {folder} is incomplete: {folder / missing[0]} is missing, but instemb_parts.json "
            "lists it, so the model would load without part of what it is. Copy the whole folder again."
        )


def load_folder(
    llm_class: type,
    folder: str | os.PathLike,
    device: str = "auto",
    precision: str = quantize.DEFAULT_PRECISION,
    **settings,
):
    """A model folder of any layout; ``settings`` (pooling, lookahead_length, max_length) apply to
    every LLM part."""
    folder = Path(folder)
    spec = read_spec(folder)
    check_listed_files(folder, spec.files)
    if spec.is_symmetric:
        entry = spec.parts[spec.routes["query"]["llm"]]
        return llm_from_folder(llm_class, folder / (entry.path or "."), device, precision=precision, **settings)
    query = route_from_config("query", spec.routes["query"])
    document = route_from_config("document", spec.routes["document"])
    identities = query.llm_identities(spec)  # a two-tower's: its sentence encoder's entry
    parts, by_path = {}, {}
    for name, entry in spec.parts.items():
        if entry.is_llm:
            path = entry.path or "."
            if path not in by_path:
                by_path[path] = llm_from_folder(
                    llm_class, folder / path, device, precision=precision, identities=identities, **settings
                )
            parts[name] = by_path[path]
    target = str(parts[query.llm].device)
    where = f"{folder}/instemb_parts.json"
    reader_parts = spec.reader_parts()  # the reranker's (reader/reranker.py), loaded on first use
    for name, entry in spec.parts.items():
        if not entry.is_llm and name not in reader_parts:
            parts[name] = load_part(entry, folder, target, where, name)
    # Saved again as loaded, an LLM part's folder is copied byte for byte (its LoRA unmerged),
    # unless other settings were asked for: then the encoder in memory is what a save must write.
    as_stored = all(value is None for value in settings.values()) and precision == quantize.DEFAULT_PRECISION
    sources = {
        name: folder / entry.path
        for name, entry in spec.parts.items()
        if as_stored and entry.is_llm and (entry.path or ".") != "."
    }
    encoder = ComposedEncoder.assemble(parts, query, document, spec.training, sources)
    # Where it was loaded from: the folder's reader (its rerank route, reader/reranker.py) is found there.
    encoder.model_folder = folder
    return encoder


def llm_from_folder(
    llm_class: type,
    folder: str | os.PathLike,
    device: str = "auto",
    pooling: str | None = None,
    lookahead_length: int | None = None,
    max_length: int | None = None,
    precision: str = quantize.DEFAULT_PRECISION,
    merge_lora: bool = True,
    identities: Sequence[dict] = (),
):
    """The ``llm_class`` encoder an LLM folder holds (load.py's ``load_llm_folder`` says
    what each option does); llm_folder.load_contents reads the folder, this builds the encoder."""
    folder = Path(folder)
    config = llm_folder.read_config(folder)
    llm_folder.check_complete(folder, config)
    target = resolve_device(device)
    quantize.check_precision(precision, target)
    parts = llm_folder.load_contents(
        folder, config, device=str(target), dtype=default_dtype(target), merge_lora=merge_lora
    )
    settings = EncoderSettings(
        pooling=pooling or config.pooling,
        lookahead_length=parts.lookahead.length if lookahead_length is None else lookahead_length,
        max_length=max_length or config.max_length,
        precision=precision,
    )
    encoder = llm_class(
        parts.backbone,
        parts.template,
        parts.lookahead,
        settings,
        training_info=config.training,
        trained_names=parts.trained,
        projection=parts.projection,
        identities=identities,
    )
    return encoder.to(parts.backbone.model.device)


llm_from_checkpoint = llm_from_folder  # alias kept for compatibility (issue 68 names round 2)
