"""A query string that carries its instruction and query-time knobs through code that passes plain
strings (a framework's retriever, an LLM's sub-queries), so that the embedder reads them off it.

    text = InstructedText("which tent?", "focus on weight", llm_weight=0.4)
    instruction_of(text), knobs_of(text)   # "focus on weight", {"llm_weight": 0.4}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..knobs import KNOBS
from ..queries import QueryKnobs

__all__ = [
    "UNSET",
    "InstructedText",
    "Knobs",
    "carried_by",
    "check_held_knobs",
    "held_knobs",
    "instruction_of",
    "knobs_of",
]

UNSET: Any = object()  # an instruction not given (None is one: the embedding's default instruction)
Knobs = Mapping[str, float | None] | None  # query-time knobs by name


class InstructedText(str):
    """A query string carrying its instruction (None: the embedding's default; "": none) and knobs
    (None: the embedding's own)."""

    def __new__(cls, text: str, instruction: str | None, knobs: Knobs = None, **named_knobs: float | None):
        made = super().__new__(cls, text)
        made.instruction, made.knobs = instruction, QueryKnobs.checked({**(knobs or {}), **named_knobs})
        return made

    def __getattr__(self, name: str) -> float | None:
        if name in KNOBS:  # a knob by its name: its value or None
            return self.knobs.get(name)
        raise AttributeError(f"InstructedText has no attribute {name!r}")

    def __reduce__(self):
        return InstructedText, (str(self), self.instruction, dict(self.knobs))


def instruction_of(text: str) -> str | None:
    """The instruction a query string carries (None: the embedding's default)."""
    return text.instruction if isinstance(text, InstructedText) else None


def knobs_of(text: str) -> Mapping[str, float]:
    """The knobs a query string carries (none: the embedding's)."""
    return text.knobs if isinstance(text, InstructedText) else {}


def carried_by(text: str) -> dict[str, Any]:
    """What a query string carries, as keyword arguments: ``instruction`` (None: the embedding's
    default) and its knobs, e.g. for the sub-queries an LLM makes of it."""
    return {"instruction": instruction_of(text), **knobs_of(text)}


def held_knobs(holder: Any) -> QueryKnobs:
    """The knobs ``holder`` holds as attributes named after them, checked (None: not given)."""
    return QueryKnobs.checked({name: getattr(holder, name) for name in KNOBS})


def check_held_knobs(holder: Any) -> QueryKnobs:
    """The knobs ``holder`` holds as attributes named after them (a query dataclass's fields),
    checked (in range, else KnobError) and set back as floats (None: not given)."""
    checked = held_knobs(holder)
    for name in KNOBS:
        setattr(holder, name, checked.get(name))
    return checked
