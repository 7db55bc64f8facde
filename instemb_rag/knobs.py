"""The one rule for the query-time knobs' values: a two-space model's ``llm_weight`` (the LLM
space's share of a query's score, 0..1) and an instruction-effect model's ``instruction_strength``
(how much the instruction moves a query's ranking, 0..10; 0: plain search by its sentence encoder).

None means the model's own. A value out of range is a ``KnobError`` that says what the knob
means; the entries check it once (queries.py), the server answers it with a 400 naming the field.
Which model takes which knob is the encoder's to declare (encoder/protocol.py ``query_knob``).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .errors import InstEmbError

__all__ = ["MAX_INSTRUCTION_STRENGTH", "MEANING", "KnobError", "check_instruction_strength", "check_llm_weight"]

MAX_INSTRUCTION_STRENGTH = 10.0

# What each knob does, and the kind of model that has it (a refusal's words).
MEANING = {
    "llm_weight": (
        "the LLM space's share of the score",
        "a two-space model (an LLM and a sentence encoder side by side)",
    ),
    "instruction_strength": ("how much the instruction moves the ranking", "an instruction-effect model"),
}


class KnobError(InstEmbError, ValueError):
    """A query-time knob out of its range (``code`` None), or given to a model without it (``code``
    "<knob>_unsupported"). A ValueError too, so a pydantic validator's refusal keeps it."""

    def __init__(self, message: str, knob: str, code: str | None = None):
        super().__init__(message)
        self.knob, self.code = knob, code


def check_llm_weight(value: Any) -> float | None:
    """None, or a number in [0, 1] (as a float); anything else is refused, saying what it means."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) or not 0 <= value <= 1:
        raise KnobError(
            f"llm_weight={value!r}: give the LLM space's share of the score, a number between 0 and 1 "
            "(1: the LLM alone, 0: the sentence encoder alone), or leave it out for the model's own.",
            "llm_weight",
        )
    return float(value)


def check_instruction_strength(value: Any) -> float | None:
    """None, or a finite number in [0, 10] (as a float); anything else is refused, saying what it means."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_INSTRUCTION_STRENGTH
    ):
        raise KnobError(
            f"instruction_strength={value!r} is outside [0, {MAX_INSTRUCTION_STRENGTH:g}]: give how much the "
            "instruction moves the ranking (0: plain search by the sentence encoder, about 1-3: the instruction "
            "decides between passages on the same topic), or leave it out for the model's own.",
            "instruction_strength",
        )
    return float(value)
