"""The untrained mix of two spaces: a symmetric InstEmb checkpoint beside a sentence encoder.

Kept apart from composed/ (which never imports the encoder module) because it loads the LLM.
"""

from __future__ import annotations

import os
from pathlib import Path

from .checkpoint import is_checkpoint
from .composed.config import llm_checkpoint_of
from .composed.effect import DEFAULT_INSTRUCTION_STRENGTH, InstructionEffectEncoder
from .composed.encoder import TwoSpacesEncoder
from .model import InstEmbEncoder, shipped_llm_checkpoint
from .modules.document_tower import DocumentTower

__all__ = ["untrained_effect", "untrained_mix"]


def untrained_mix(
    documents_llm: str | os.PathLike | None = None,
    tower: str = "minilm",
    llm_weight: float = 0.5,
    device: str = "auto",
    **settings,
) -> TwoSpacesEncoder:
    """The fixed mix of a symmetric checkpoint or model folder (None: the shipped LLM,
    ``shipped_llm_checkpoint()``; a two-space folder: its documents' LLM) and a sentence encoder
    (an installed teacher or a folder): no query-side parts, exactly the two spaces side by side at
    ``llm_weight``. ``settings`` go to the LLM's loading."""
    source = llm_checkpoint_of(Path(documents_llm)) if documents_llm is not None else shipped_llm_checkpoint()
    llm = InstEmbEncoder.from_pretrained(source, device=device, **settings)
    document_tower = DocumentTower.load(DocumentTower.recorded_reference(tower), device=str(llm.device))
    kept_source = source if is_checkpoint(source) else None  # a bare model folder is saved, not copied
    return TwoSpacesEncoder(llm, document_tower, llm_weight=llm_weight, documents_source=kept_source)


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
