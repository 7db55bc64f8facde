"""Loading in one place: every model reference is resolved here.

    None, "default"        the shipped default (instemb_rag/default_checkpoint: a symmetric
                           checkpoint or a parts folder), else the untrained default backbone
    a model folder         any layout (composed/spec.py reads format 2 and a checkpoint;
                           composed/legacy.py converts every older one): a symmetric checkpoint is its LLM
                           (InstEmbEncoder), any other the encoder of parts its routes make
    concat:[W:]A,B         two models side by side at a fixed weight (composed/concat.py)
    pasted:NAME            a sentence encoder on both sides, the instruction pasted before the
                           query (composed/pasted.py)
    anything else          a Hugging Face model folder or the default backbone's name: an
                           untrained InstEmb encoder over it

``InstEmbEncoder.from_pretrained``, the command line, ``Index.open``, the Ray workers, eval and the
LlamaIndex integration all call ``load_model``. The LLM parts are built here (``load_checkpoint``:
composed/ never imports the LLM's module); ``untrained_mix`` and ``untrained_effect`` build the
untrained arrangements from a checkpoint and a sentence encoder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from ..errors import CheckpointError
from . import checkpoint, model, quantize
from .checkpoint import is_checkpoint
from .combine import DEFAULT_INSTRUCTION_STRENGTH
from .composed.concat import ConcatenatedEncoder, is_concatenated_reference
from .composed.config import is_composed
from .composed.effect import InstructionEffectEncoder
from .composed.encoder import ComposedEncoder, TwoSpacesEncoder
from .composed.parts import load_part
from .composed.pasted import PastedInstructionEncoder, is_pasted_reference
from .composed.routes import route_from_config
from .composed.spec import llm_checkpoint_of, read_spec
from .device import default_dtype, resolve_device
from .modules.tower import DocumentTower
from .settings import EncoderSettings

__all__ = [
    "is_composite_reference",
    "load_checkpoint",
    "is_model_folder",
    "load_folder",
    "load_model",
    "shipped_llm_checkpoint",
    "untrained_effect",
    "untrained_mix",
]

DEFAULT = "default"


def is_model_folder(folder: str | os.PathLike | None) -> bool:
    """A model folder of this project (a checkpoint or a parts folder, any layout)."""
    return folder is not None and (is_checkpoint(folder) or is_composed(folder))


def is_composite_reference(reference) -> bool:
    """``concat:`` or ``pasted:``: a model made here of other models (no LLM of its own to compile)."""
    return reference is not None and (is_concatenated_reference(str(reference)) or is_pasted_reference(str(reference)))


def shipped_default() -> Path | None:
    """The shipped default's folder (read from model.py, where tests may point it elsewhere), or None."""
    folder = model.SHIPPED_CHECKPOINT
    return folder if is_model_folder(folder) else None


def shipped_llm_checkpoint() -> Path:
    """The shipped symmetric LLM checkpoint, whichever layout ships: the LLM part of a parts
    folder (``documents_llm/``), else the shipped checkpoint itself. What code that means the LLM
    loads (its internals, its document space, a training start); ``load_model(None)`` is the
    shipped default as a whole."""
    return llm_checkpoint_of(model.SHIPPED_CHECKPOINT)


def load_model(
    reference: str | os.PathLike | None = None,
    device: str = "auto",
    pooling: str | None = None,
    lookahead_length: int | None = None,
    max_length: int | None = None,
    precision: str = quantize.DEFAULT_PRECISION,
    part_loader: Callable[[str | None], object] | None = None,
):
    """The model ``reference`` names (see the module docstring). ``pooling``, ``lookahead_length``
    and ``max_length`` override an LLM's own settings (None: its own); ``part_loader`` loads each
    side of a ``concat:`` reference (default: ``load_model`` at this device and precision)."""
    settings = {"pooling": pooling, "lookahead_length": lookahead_length, "max_length": max_length}
    if reference is not None and is_concatenated_reference(str(reference)):
        loader = part_loader or (lambda part: load_model(part, device, precision=precision))
        return ConcatenatedEncoder.load(str(reference), loader)
    if reference is not None and is_pasted_reference(str(reference)):
        return PastedInstructionEncoder.load(str(reference), device="cpu" if device == "auto" else device)
    if reference is None or str(reference) == DEFAULT:
        reference = shipped_default()
    if is_model_folder(reference):
        return load_folder(reference, device, precision, **settings)
    return model.InstEmbEncoder.from_backbone(
        reference,
        lookahead_length=model.DEFAULT_LOOKAHEAD if lookahead_length is None else lookahead_length,
        pooling=pooling or "daap",
        max_length=max_length or 512,
        device=device,
        precision=precision,
    )


def check_listed_files(folder: Path, files: list[str] | None) -> None:
    """Refuse a parts folder that lacks a part file it lists (as checkpoint.check_complete does)."""
    missing = [name for name in files or () if not (folder / name).is_file()]
    if missing:
        raise CheckpointError(
            f"Model folder {folder} is incomplete: {folder / missing[0]} is missing, but instemb_parts.json "
            "lists it, so the model would load without part of what it is. Copy the whole folder again."
        )


def load_folder(
    folder: str | os.PathLike, device: str = "auto", precision: str = quantize.DEFAULT_PRECISION, **settings
):
    """A model folder of any layout; ``settings`` (pooling, lookahead_length, max_length) apply to
    every LLM part."""
    folder = Path(folder)
    spec = read_spec(folder)
    check_listed_files(folder, spec.files)
    if spec.is_symmetric:
        entry = spec.parts[spec.routes["query"]["llm"]]
        return load_checkpoint(folder / (entry.path or "."), device, precision=precision, **settings)
    query = route_from_config("query", spec.routes["query"])
    document = route_from_config("document", spec.routes["document"])
    identities = query.llm_identities(spec)  # a two-tower's: its sentence encoder's entry
    parts, by_path = {}, {}
    for name, entry in spec.parts.items():
        if entry.is_llm:
            path = entry.path or "."
            if path not in by_path:
                by_path[path] = load_checkpoint(
                    folder / path, device, precision=precision, identities=identities, **settings
                )
            parts[name] = by_path[path]
    target = str(parts[query.llm].device)
    where = f"{folder}/instemb_parts.json"
    for name, entry in spec.parts.items():
        if not entry.is_llm:
            parts[name] = load_part(entry, folder, target, where, name)
    # Saved again as loaded, an LLM part's folder is copied byte for byte (its LoRA unmerged),
    # unless other settings were asked for: then the encoder in memory is what a save must write.
    as_stored = all(value is None for value in settings.values()) and precision == quantize.DEFAULT_PRECISION
    sources = {
        name: folder / entry.path
        for name, entry in spec.parts.items()
        if as_stored and entry.is_llm and (entry.path or ".") != "."
    }
    return ComposedEncoder.assemble(parts, query, document, spec.training, sources)


def load_checkpoint(
    folder: str | os.PathLike,
    device: str = "auto",
    pooling: str | None = None,
    lookahead_length: int | None = None,
    max_length: int | None = None,
    precision: str = quantize.DEFAULT_PRECISION,
    merge_lora: bool = True,
    identities: Sequence[dict] = (),
) -> model.InstEmbEncoder:
    """The InstEmbEncoder a checkpoint folder holds; ``None`` settings come from its config.
    ``identities``: more identity an int8 encoder is also fingerprinted with on its float weights
    (``fingerprint_with_identity``: the two-tower model it is the LLM of).

    The LoRA adapter is merged into the weights (inference: a plain transformers model, no peft
    import). ``merge_lora=False`` leaves it out, for training on from the checkpoint, which
    runs it live through peft (training/continuation.py) so it goes on training as an adapter.
    checkpoint.load_parts reads the folder; this builds the encoder from the parts.
    """
    folder = Path(folder)
    config = checkpoint.read_config(folder)
    checkpoint.check_complete(folder, config)
    target = resolve_device(device)
    quantize.check_precision(precision, target)
    parts = checkpoint.load_parts(
        folder, config, device=str(target), dtype=default_dtype(target), merge_lora=merge_lora
    )
    settings = EncoderSettings(
        pooling=pooling or config.pooling,
        lookahead_length=parts.lookahead.length if lookahead_length is None else lookahead_length,
        max_length=max_length or config.max_length,
        precision=precision,
    )
    encoder = model.InstEmbEncoder(
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


def untrained_mix(
    documents_llm: str | os.PathLike | None = None,
    tower: str = "minilm",
    llm_weight: float = 0.5,
    device: str = "auto",
    **settings,
) -> TwoSpacesEncoder:
    """The fixed mix of a symmetric checkpoint or model folder (None: the shipped LLM,
    ``shipped_llm_checkpoint()``; a parts folder: its documents' LLM) and a sentence encoder (an
    installed teacher or a folder): no query-side parts, exactly the two spaces side by side at
    ``llm_weight``. ``settings`` go to the LLM's loading."""
    source = llm_checkpoint_of(Path(documents_llm)) if documents_llm is not None else shipped_llm_checkpoint()
    llm = load_model(source, device=device, **settings)
    sentence_encoder = DocumentTower.load(DocumentTower.recorded_reference(tower), device=str(llm.device))
    kept_source = source if is_checkpoint(source) else None  # a bare model folder is saved, not copied
    return TwoSpacesEncoder(llm, sentence_encoder, llm_weight=llm_weight, documents_source=kept_source)


def untrained_effect(
    documents_llm: str | os.PathLike | None = None,
    tower: str = "minilm",
    instruction_strength: float = DEFAULT_INSTRUCTION_STRENGTH,
    device: str = "auto",
    **settings,
) -> InstructionEffectEncoder:
    """The instruction's effect with no trained part (issue 56's measurement): the sentence
    encoder's plain score plus ``instruction_strength`` times the effect's inner product in the
    LLM's space. The LLM and the sentence encoder are as in ``untrained_mix``."""
    mix = untrained_mix(documents_llm, tower, device=device, **settings)
    return InstructionEffectEncoder(
        mix.documents_llm, mix.tower, instruction_strength=instruction_strength, documents_source=mix.documents_source
    )
