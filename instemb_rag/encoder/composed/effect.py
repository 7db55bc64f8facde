"""InstructionEffectEncoder (issue 56): a sentence encoder's plain score plus what the instruction
changes in the LLM's space; a composition of the parts and routes of encoder.py and routes.py.

Documents: the two-space layout as it is (``TwoSpacesDocuments``: ``[D(d); M(d)] / sqrt(2)``), so an index
built by a two-space model over the same two parts needs no rebuild.

A query q under instruction i, from one LLM prefill of q with two instruction suffixes (the
template puts the instruction after the text: the shared-prefix path):

    effect  = D(q, i) - D(q, r)                the instruction's effect, r = REFERENCE_INSTRUCTION
    query   = [s * h(effect); M(i + q)]        normalised (every query of the Encoder protocol is)
    score   ~ cos_M(i + q, d) + s * < h(effect), D(d) >

``h`` and the per-query gain come from the effect map (effect_map.py: the identity at gain 1
untrained); ``s`` is the instruction strength (the user's knob, default from the folder's config)
times that gain. Without an instruction, or with a blank one, the query is ``[0; M(q)]``: exactly
the sentence encoder, so plain questions get plain search. The strength is a query-time knob,
in no fingerprint: changing it never re-indexes.
"""

from __future__ import annotations

import os

from ...errors import InstEmbError
from ..combine import (
    DEFAULT_INSTRUCTION_STRENGTH,
    MAX_INSTRUCTION_STRENGTH,
    REFERENCE_INSTRUCTION,
    check_instruction_strength,
    effect_scale,
)
from ..modules.sentence_encoder import SentenceEncoder
from .effect_map import EffectMap
from .encoder import ComposedEncoder, of_query_route
from .routes import EffectQueries, TwoSpacesDocuments

__all__ = [
    "DEFAULT_INSTRUCTION_STRENGTH",
    "MAX_INSTRUCTION_STRENGTH",
    "REFERENCE_INSTRUCTION",
    "InstructionEffectEncoder",
    "check_instruction_strength",
    "effect_scale",
]


class InstructionEffectEncoder(ComposedEncoder):
    """The Encoder protocol over the shipped LLM, a sentence encoder and an effect map."""

    def __init__(
        self,
        llm,
        sentence_encoder: SentenceEncoder,
        effect_map: EffectMap | None = None,
        instruction_strength: float = DEFAULT_INSTRUCTION_STRENGTH,
        reference_instruction: str = REFERENCE_INSTRUCTION,
        training_info: dict | None = None,
        documents_source: str | os.PathLike | None = None,
    ):
        if effect_map is not None and effect_map.dimension != llm.dimension:
            raise InstEmbError(f"The effect map reads {effect_map.dimension} dimensions, the LLM has {llm.dimension}.")
        parts = {
            "documents_llm": llm,
            "sentence_encoder": sentence_encoder,
            **({"effect_map": effect_map} if effect_map is not None else {}),
        }
        query = EffectQueries(
            effect_map="effect_map" if effect_map is not None else None,
            instruction_strength=instruction_strength,
            reference_instruction=reference_instruction,
        )
        super().__init__(parts, query, TwoSpacesDocuments(), training_info, {"documents_llm": documents_source})

    KIND = "instruction effect"
    instruction_strength = of_query_route("instruction_strength")
    reference_instruction = of_query_route("reference_instruction")

    def llm_pairs(self, queries, instructions, batch_size: int = 16):
        return self.query_route.llm_pairs(self, queries, instructions, batch_size)

    def with_instruction_strength(self, instruction_strength: float) -> InstructionEffectEncoder:
        """This encoder (shared parts) with another default strength: a new view."""
        route = self.query_route
        query = EffectQueries(
            route.llm, route.sentence_encoder, route.effect_map, instruction_strength, route.reference_instruction
        )
        return self.with_parts(query_route=query)
