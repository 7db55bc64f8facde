"""An instruction-effect encoder whose query side has an LLM of its own (issue 61).

The documents stay the two-space layout over the documents' LLM and the sentence encoder
(``[D(d); M(d)]``, as indexed: no re-index). The query's effect comes from ``query_llm``: the
documents' LLM with its LoRA trained on for queries (training/effect/query_llm.py), so

    effect = D'(q, i) - D'(q, r),   query = [s gain h(effect); M(i + q)]

A saved folder lists the parts ``documents_llm``, ``query_llm``, ``sentence_encoder`` and ``effect_map`` and the
``effect`` query route naming ``query_llm``; it loads through ``encoder.load`` like any composed folder.
"""

from __future__ import annotations

import os

from ...errors import InstEmbError
from ..combine import REFERENCE_INSTRUCTION
from .effect_map import EffectMap
from .encoder import ComposedEncoder
from .routes import EffectQueries, TwoSpacesDocuments


def effect_with_query_llm(
    documents_llm,
    query_llm,
    sentence_encoder,
    effect_map: EffectMap,
    reference_instruction: str = REFERENCE_INSTRUCTION,
    training_info: dict | None = None,
    documents_source: str | os.PathLike | None = None,
    **knobs: float,
):
    """The InstructionEffectEncoder over these parts (its query route reads ``query_llm``); ``knobs``:
    the folder's own value of its route's query-time knob (knobs.py; left out: the declaration's)."""
    if query_llm.dimension != documents_llm.dimension or effect_map.dimension != documents_llm.dimension:
        raise InstEmbError(
            f"The query LLM ({query_llm.dimension}), the effect map ({effect_map.dimension}) and the documents' "
            f"LLM ({documents_llm.dimension}) must share one width: the effect is scored against D(d)."
        )
    parts = {
        "documents_llm": documents_llm,
        "query_llm": query_llm,
        "sentence_encoder": sentence_encoder,
        "effect_map": effect_map,
    }
    query = EffectQueries(
        llm="query_llm",
        effect_map="effect_map",
        reference_instruction=reference_instruction,
        **EffectQueries.own_knobs(knobs),
    )
    return ComposedEncoder.assemble(
        parts, query, TwoSpacesDocuments(), training_info, {"documents_llm": documents_source}
    )
