"""``llm_weight``: a two-space model's knob, the LLM space's share of a query's score.

A two-space encoder (instemb_rag/encoder/composed/) stores documents as both halves side by side,
so the weight lives on the query side only: any weight searches the same index. Its
``encode_queries`` takes ``llm_weight`` (0..1; None: the model's own weight, or its gate's per
query); a server of such a model says so on its model card. An encoder of one space has no such
knob, and a weight given to it is refused (it would silently change nothing).
"""

from __future__ import annotations

import math
from typing import Any

from instemb_rag.errors import InstEmbError


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
            f"llm_weight={weight}, but this model embeds in one space: llm_weight (the LLM space's share "
            "of the score) applies to a two-space model (an LLM and a sentence encoder side by side) only. "
            "Leave it out (None)."
        )
    return weight
