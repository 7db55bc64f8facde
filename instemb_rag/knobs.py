"""The query-time knobs, each declared once: its name, its range, the value a model folder that
gives none gets, and what it means (the words of every help text and refusal).

    LLM_WEIGHT             a two-space model's: the LLM space's share of a query's score, 0..1
    INSTRUCTION_STRENGTH   an instruction-effect model's: how much the instruction moves a query's
                           ranking, 0..10 (0: plain search by its sentence encoder)

A query route declares the knobs it takes (encoder/composed/routes.py ``Route.knobs``, and its
field of the same name holds the folder's own value); the entries (the command line, the server's
schemas, ``Index.search``, the LlamaIndex embedding) pass a query's knobs on as one mapping, name
-> value (queries.py ``QueryKnobs``), checked once where they come in by ``check_knobs``. A value
None, or a knob left out, means the model's own. Adding a knob: its declaration here, its route,
its tests. A refusal is a ``KnobError``; the server answers it with a 400 naming the field.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InstEmbError

__all__ = [
    "INSTRUCTION_STRENGTH",
    "KNOBS",
    "LLM_WEIGHT",
    "MAX_INSTRUCTION_STRENGTH",
    "MEANING",
    "Knob",
    "KnobError",
    "check_instruction_strength",
    "check_knobs",
    "check_llm_weight",
]


class KnobError(InstEmbError, ValueError):
    """A query-time knob out of its range (``code`` None), or given to a model without it (``code``
    "<knob>_unsupported"). A ValueError too, so a pydantic validator's refusal keeps it."""

    def __init__(self, message: str, knob: str, code: str | None = None):
        super().__init__(message)
        self.knob, self.code = knob, code


@dataclass(frozen=True)
class Knob:
    """One query-time knob: what every entry reads its help and range from."""

    name: str
    low: float
    high: float
    default: float  # the value of a model folder that records none
    meaning: str  # what it sets, e.g. "the LLM space's share of the score"
    scale: str  # what its values do, e.g. "1: the LLM alone, 0: the sentence encoder alone"
    model: str  # the kind of model that has it, e.g. "a two-space model"
    model_long: str  # the same, said in full (a refusal of a knob the model lacks)
    sets: str  # what giving it does, e.g. "sets the share of the score between ... two spaces"
    label: str  # its name in a results table's title, e.g. "LLM weight"
    note: str = ""  # more for the command-line help (what --explain shows of it)
    column: str = ""  # its column's heading in --explain's table (empty: its label)

    @property
    def option(self) -> str:
        """Its command-line option."""
        return "--" + self.name.replace("_", "-")

    @property
    def heading(self) -> str:
        """Its column's heading in --explain's table (index/display.py)."""
        return self.column or self.label

    @property
    def help(self) -> str:
        """One sentence for a help text or a schema: the meaning and the range, once."""
        return f"{self.model.capitalize()}'s query: {self.meaning}, {self.low:g}..{self.high:g} ({self.scale})"

    def check(self, value: Any) -> float | None:
        """None, or a finite number in range (as a float); anything else is refused, saying what it means."""
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or not self.low <= value <= self.high
        ):
            raise KnobError(
                f"{self.name}={value!r}: give {self.meaning}, a number between {self.low:g} and {self.high:g} "
                f"({self.scale}), or leave it out for the model's own.",
                self.name,
            )
        return float(value)


LLM_WEIGHT = Knob(
    name="llm_weight",
    low=0.0,
    high=1.0,
    default=0.5,
    meaning="the LLM space's share of the score",
    scale="1: the LLM alone, 0: the sentence encoder alone",
    model="a two-space model",
    model_long="a two-space model (an LLM and a sentence encoder side by side)",
    sets="sets the share of the score between a two-space model's two spaces",
    label="LLM weight",
)
INSTRUCTION_STRENGTH = Knob(
    name="instruction_strength",
    low=0.0,
    high=10.0,
    default=1.5,
    meaning="how much the instruction moves the ranking",
    scale="0: plain search by the sentence encoder, about 1-3: the instruction decides between passages on the "
    "same topic",
    model="an instruction-effect model",
    model_long="an instruction-effect model",
    sets="sets how much the instruction moves an instruction-effect model's ranking (0: plain search)",
    label="instruction strength",
    column="strength",
    note="--explain shows it and the effective strength (it times the model's gain for the query).",
)
KNOBS: dict[str, Knob] = {knob.name: knob for knob in (LLM_WEIGHT, INSTRUCTION_STRENGTH)}

# The older names, read from the declarations.
MAX_INSTRUCTION_STRENGTH = INSTRUCTION_STRENGTH.high
MEANING = {knob.name: (knob.meaning, knob.model_long) for knob in KNOBS.values()}
check_llm_weight = LLM_WEIGHT.check
check_instruction_strength = INSTRUCTION_STRENGTH.check


def check_knobs(knobs: Mapping[str, Any] | None) -> dict[str, float]:
    """A query's knobs as they enter: each a declared knob in its range; those None left out."""
    if knobs is None:
        return {}
    if not isinstance(knobs, Mapping):
        raise KnobError(f"knobs={knobs!r}: give a mapping of knob names to values, e.g. {{'llm_weight': 0.7}}.", "")
    checked = {}
    for name, value in knobs.items():
        if name not in KNOBS:
            raise KnobError(
                f"{name!r} is not a query-time knob: the knobs are {', '.join(KNOBS)} (each model takes its own).",
                str(name),
            )
        if (value := KNOBS[name].check(value)) is not None:
            checked[name] = value
    return checked
