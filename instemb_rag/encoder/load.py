"""Loading: every model reference, what it names, and the functions that load one.

    None, "default"        the shipped default (instemb_rag/default_checkpoint: a model
                           folder, an LLM folder or a composed folder), else the untrained default backbone
    a model folder         any layout (composed/spec.py reads format 2 and an LLM folder;
                           composed/legacy.py converts every older one): a symmetric LLM folder is its LLM
                           (InstEmbEncoder), any other the encoder of parts its routes make
    concat:[W:]A,B         two models side by side at a fixed weight (composed/concat.py)
    pasted:NAME            a sentence encoder on both sides, the instruction pasted before the
                           query (composed/pasted.py)
    anything else          a Hugging Face model folder or the default backbone's name: an
                           untrained InstEmb encoder over it

``load_model`` is the one loader of a model, whatever the reference names: the command line
(cli/common.py ``load_encoder`` adds its int8 report and --compile), ``Index.open``, the Ray
workers, eval, an application's source (client/sources.py ``open_encoder``: a server or a folder)
and the LlamaIndex integration call it; ``InstEmbEncoder.from_pretrained`` is the same function and
``load_folder`` an older name of it. ``load_llm_folder`` is the LLM part's own builder (what
``load_model`` runs for an LLM folder), for training on from one (``merge_lora=False``). The references are resolved in
references.py, which is handed the LLM class (model.py's from_pretrained passes ``cls``) rather
than importing it, so the imports go one way: load.py -> model.py -> references.py -> composed/
(which never imports the LLM's module). ``load_llm_folder`` builds an LLM part;
``untrained_two_spaces`` and ``untrained_effect`` build the untrained arrangements from an LLM folder and
a sentence encoder.

Before issue 68 (names round 2) ``load_llm_folder`` was ``load_checkpoint`` and ``shipped_llm_folder``
``shipped_llm_checkpoint`` (both kept as aliases).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from ..knobs import KNOBS
from . import model, quantize
from .composed.effect import InstructionEffectEncoder
from .composed.encoder import TwoSpacesEncoder
from .composed.routes import EffectQueries, Route, TwoSpacesQueries
from .composed.spec import llm_folder_of
from .llm_folder import is_llm_folder
from .modules.sentence_encoder import SentenceEncoder
from .references import is_composite_reference, is_model_folder, llm_from_folder

__all__ = [
    "is_composite_reference",
    "load_checkpoint",
    "load_llm_folder",
    "is_model_folder",
    "load_folder",
    "load_model",
    "shipped_llm_checkpoint",
    "shipped_llm_folder",
    "untrained_effect",
    "untrained_two_spaces",
]


# Defined once, beside the shipped folder it reads (model.py ``SHIPPED_MODEL_FOLDER``); handed out here
# too: the LLM part of a composed folder (``documents_llm/``), else the shipped LLM folder itself.
shipped_llm_folder = model.shipped_llm_folder
shipped_llm_checkpoint = model.shipped_llm_folder  # alias kept for compatibility (issue 68 names round 2)


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
    return model.InstEmbEncoder.from_pretrained(
        reference,
        device,
        pooling=pooling,
        lookahead_length=lookahead_length,
        max_length=max_length,
        precision=precision,
        part_loader=part_loader,
    )


def load_folder(
    folder: str | os.PathLike, device: str = "auto", precision: str = quantize.DEFAULT_PRECISION, **settings
):
    """Older name (kept for compatibility): ``load_model`` of a model folder of any layout;
    ``settings`` (pooling, lookahead_length, max_length) apply to every LLM part."""
    return load_model(folder, device, precision=precision, **settings)


def load_llm_folder(
    folder: str | os.PathLike,
    device: str = "auto",
    pooling: str | None = None,
    lookahead_length: int | None = None,
    max_length: int | None = None,
    precision: str = quantize.DEFAULT_PRECISION,
    merge_lora: bool = True,
    identities: Sequence[dict] = (),
) -> model.InstEmbEncoder:
    """The InstEmbEncoder an LLM folder holds; ``None`` settings come from its config.
    ``identities``: more identity an int8 encoder is also fingerprinted with on its float weights
    (``fingerprint_with_identity``: the two-tower model it is the LLM of).

    The LoRA adapter is merged into the weights (inference: a plain transformers model, no peft
    import). ``merge_lora=False`` leaves it out, for training on from the folder, which
    runs it live through peft (training/continuation.py) so it goes on training as an adapter.
    llm_folder.load_contents reads the folder; references.llm_from_folder builds the encoder.
    """
    return llm_from_folder(
        model.InstEmbEncoder,
        folder,
        device,
        pooling,
        lookahead_length,
        max_length,
        precision,
        merge_lora=merge_lora,
        identities=identities,
    )


load_checkpoint = load_llm_folder  # alias kept for compatibility (issue 68 names round 2)


def untrained_two_spaces(
    documents_llm: str | os.PathLike | None = None,
    sentence_encoder: str = "minilm",
    knob: float | None = None,
    device: str = "auto",
    **settings,
) -> TwoSpacesEncoder:
    """The untrained two-space model of a symmetric LLM folder or model folder (None: the shipped LLM,
    ``shipped_llm_folder()``; a composed folder: its documents' LLM) and a sentence encoder (an
    installed teacher or a folder): no query-side parts, exactly the two spaces side by side at
    its query-time knob's value (the weight: ``knob``, or by the knob's name, knobs.py; None: the
    declaration's default). The other ``settings`` go to the LLM's loading."""
    knobs = untrained_knobs(TwoSpacesQueries, knob, settings)
    source = llm_folder_of(Path(documents_llm)) if documents_llm is not None else shipped_llm_folder()
    llm = load_model(source, device=device, **settings)
    sentence_encoder = SentenceEncoder.load(
        SentenceEncoder.recorded_reference(sentence_encoder), device=str(llm.device)
    )
    kept_source = source if is_llm_folder(source) else None  # a bare model folder is saved, not copied
    return TwoSpacesEncoder(llm, sentence_encoder, documents_source=kept_source, **knobs)


def untrained_effect(
    documents_llm: str | os.PathLike | None = None,
    sentence_encoder: str = "minilm",
    knob: float | None = None,
    device: str = "auto",
    **settings,
) -> InstructionEffectEncoder:
    """The instruction's effect with no trained part (issue 56's measurement): the sentence
    encoder's plain score plus the strength (``knob``, or by the knob's name, knobs.py; None: the
    declaration's default) times the effect's inner product in the LLM's space. The LLM and the
    sentence encoder are as in ``untrained_two_spaces``."""
    knobs = untrained_knobs(EffectQueries, knob, settings)
    model = untrained_two_spaces(documents_llm, sentence_encoder, device=device, **settings)
    return InstructionEffectEncoder(
        model.documents_llm, model.sentence_encoder, documents_source=model.documents_source, **knobs
    )


def untrained_knobs(route: type[Route], value: float | None, settings: dict) -> dict:
    """The query-time knobs an untrained builder was given for ``route``: its knob's value
    positionally (``value``), or knobs by name among ``settings`` (taken out of them: the rest go
    to the LLM's loading); one the route does not declare is a TypeError."""
    given = {name: settings.pop(name) for name in list(settings) if name in KNOBS}
    if value is not None:
        name = route.knobs[0].name
        if name in given:
            raise TypeError(f"{name} given twice: by position and by name.")
        given[name] = value
    return route.own_knobs(given)


# Its name before issue 62 called the two-space arrangement by one name; code written against it runs.
untrained_mix = untrained_two_spaces  # older name (issue 62)
