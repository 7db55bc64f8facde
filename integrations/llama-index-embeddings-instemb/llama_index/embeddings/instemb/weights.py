"""``llm_weight``: a two-space model's knob, the LLM space's share of a query's score.

A two-space encoder (instemb_rag/encoder/composed/) stores documents as both halves side by side,
so the weight lives on the query side only: any weight searches the same index. Its
``encode_queries`` takes ``llm_weight`` (0..1; None: the model's own weight, or its gate's per
query); a server of such a model says so on its model card. An encoder of one space has no such
knob, and a weight given to it is refused (it would silently change nothing).

``instruction_strength``: an instruction-effect model's knob, how much the instruction moves a
query's ranking (0..10; 0: plain search by its sentence encoder; None: the model's own). The same
way: a query-side knob only, declared by the encoder (or the server's model card), refused by a
model without it.
"""

from __future__ import annotations

import math
from typing import Any

from instemb_rag.errors import InstEmbError

# instemb_rag.encoder.composed.effect's bound (that module loads torch; a remote client has none).
MAX_INSTRUCTION_STRENGTH = 10.0


def check_llm_weight(value: Any) -> float | None:
    """None, or a number in [0, 1] (as a float); anything else is refused, saying what it means."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0 <= value <= 1:
        raise InstEmbError(
            f"llm_weight={value!r}: give the LLM space's share of the score, a number between 0 and 1 "
            "(1: the LLM alone, 0: the sentence encoder alone), or None for the model's own."
        )
    return float(value)


def takes_llm_weight(encoder: Any) -> bool:
    """Whether the encoder has the knob (instemb_rag.encoder.protocol: the one rule; a
    RemoteEncoder declares it from its server's model card)."""
    from instemb_rag.encoder.protocol import takes_llm_weight as declared

    return declared(encoder)


def require_llm_weight(encoder: Any, value: Any) -> float | None:
    """``check_llm_weight``, and a weight only for an encoder that takes one."""
    weight = check_llm_weight(value)
    if weight is not None and not takes_llm_weight(encoder):
        raise InstEmbError(
            f"llm_weight={weight}, but this model {model_in_words(encoder)}: llm_weight (the LLM space's share "
            "of the score) applies to a two-space model (an LLM and a sentence encoder side by side) only. "
            "Leave it out (None)."
        )
    return weight


def check_instruction_strength(value: Any) -> float | None:
    """None, or a finite number in [0, 10] (as a float); anything else is refused, saying what it means
    (instemb_rag.encoder.composed.effect.check_instruction_strength's rule, without torch)."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= MAX_INSTRUCTION_STRENGTH
    ):
        raise InstEmbError(
            f"instruction_strength={value!r}: give how much the instruction moves the ranking, a number between "
            f"0 and {MAX_INSTRUCTION_STRENGTH:g} (0: plain search by the sentence encoder, about 1-3: the "
            "instruction decides between passages on the same topic), or None for the model's own."
        )
    return float(value)


def takes_instruction_strength(encoder: Any) -> bool:
    """Whether the encoder has the knob (instemb_rag.encoder.protocol: the one rule)."""
    from instemb_rag.encoder.protocol import takes_instruction_strength as declared

    return declared(encoder)


def require_instruction_strength(encoder: Any, value: Any) -> float | None:
    """``check_instruction_strength``, and a strength only for an encoder that takes one."""
    strength = check_instruction_strength(value)
    if strength is not None and not takes_instruction_strength(encoder):
        raise InstEmbError(
            f"instruction_strength={strength}, but this model {model_in_words(encoder)}: instruction_strength "
            "(how much the instruction moves the ranking) applies to an instruction-effect model only. "
            "Leave it out (None)."
        )
    return strength


def query_knobs(llm_weight: float | None, instruction_strength: float | None) -> dict[str, float]:
    """The knobs given, as keyword arguments of ``encode_queries`` (only a model with a knob gets it)."""
    given = {"llm_weight": llm_weight, "instruction_strength": instruction_strength}
    return {knob: value for knob, value in given.items() if value is not None}


def model_in_words(encoder: Any) -> str:
    """What the model is, by its query-time knob (for a refused knob's message)."""
    if takes_llm_weight(encoder):
        return "is a two-space model, whose knob is llm_weight"
    if takes_instruction_strength(encoder):
        return "is an instruction-effect model, whose knob is instruction_strength"
    return "embeds in one space, with no query-time knob"
