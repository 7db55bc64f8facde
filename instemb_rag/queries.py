"""A query as it enters: its text, its instruction and its query-time knob, checked once where
they come in, and passed on typed, so that nothing on the way to the encoder checks them again.

The entries: the command line (cli/query.py), ``Index.search`` and ``Index.explain``, the
server's request bodies (serve/schemas.py validates the knobs; serve/errors.py answers a
``KnobError`` with a 400), and the LlamaIndex embedding's fields and calls. The encoder keeps its
own guards, for code that calls it directly.

    knobs = QueryKnobs.checked(llm_weight=0.7)            # in range, else KnobError
    knobs.require(encoder)                                # a knob the model lacks: KnobError
    encoder.encode_queries(texts, instructions, **knobs.given())
    query = Query.checked("Which tent?", " ", llm_weight=0.7)   # instruction None: blank is none

``llm_weight`` is a two-space model's knob (the LLM space's share of a query's score, 0..1),
``instruction_strength`` an instruction-effect model's (how much the instruction moves a query's
ranking, 0..10; 0: plain search by its sentence encoder); their ranges are knobs.py's. A model
declares the knob it takes (encoder/protocol.py ``query_knob``: a RemoteEncoder from its server's
model card); a knob given to a model without it is refused, since it would silently change
nothing. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .encoder.protocol import query_knob
from .errors import InstEmbError
from .instructions import normalize_instruction
from .knobs import MEANING, KnobError, check_instruction_strength, check_llm_weight

__all__ = ["EMPTY_QUERY", "EmptyQueryError", "Query", "QueryKnobs", "check_texts", "model_in_words"]

EMPTY_QUERY = "The query is empty: give the text to search for"


class EmptyQueryError(InstEmbError):
    """A query of no text (empty or whitespace)."""


def model_in_words(encoder: Any) -> str:
    """What the model is, by the query-time knob it takes (for a refused knob's message)."""
    has = query_knob(encoder)
    if has == "llm_weight":
        return "a two-space model, whose knob is llm_weight"
    if has == "instruction_strength":
        return "an instruction-effect model, whose knob is instruction_strength"
    return "a model of one space (it embeds in one space, with no query-time knob)"


def check_texts(texts: Sequence[object], kind: str = "query") -> None:
    """What an embedding call takes as text (the LlamaIndex embedding's queries and documents): each a
    str of valid Unicode, a query one with more than whitespace (as ``Query.checked`` asks). ``str()``
    would have made None the query "None" and bytes "b'...'"; a lone surrogate (text decoded with
    errors="surrogateescape", a broken JSON escape) would reach the tokenizer, which raises a bare
    TypeError."""
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            hint = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
            raise InstEmbError(f"The {kind} #{position} is {type(text).__name__}, not a string{hint}.")
        if kind == "query" and not text.strip():
            raise EmptyQueryError(f"{EMPTY_QUERY}." if len(texts) == 1 else f"{EMPTY_QUERY} (query #{position}).")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InstEmbError(
                f"The {kind} #{position} is not valid Unicode: it holds a lone surrogate ({text[error.start]!r}) "
                f"at character {error.start}, as text decoded with errors='surrogateescape' or a broken JSON "
                "escape does. Decode the source with errors='replace' (or clean the text) before embedding it."
            ) from None


@dataclass(frozen=True)
class QueryKnobs:
    """A query's knobs, each in range or None (the model's own). Build it with ``checked``."""

    llm_weight: float | None = None
    instruction_strength: float | None = None

    @classmethod
    def checked(cls, llm_weight: Any = None, instruction_strength: Any = None) -> QueryKnobs:
        return cls(check_llm_weight(llm_weight), check_instruction_strength(instruction_strength))

    def given(self) -> dict[str, float]:
        """The knobs set, as keyword arguments of ``encode_queries`` and ``explain``."""
        return {
            knob: value
            for knob, value in (("llm_weight", self.llm_weight), ("instruction_strength", self.instruction_strength))
            if value is not None
        }

    def or_else(self, fallback: QueryKnobs) -> QueryKnobs:
        """Each knob: this one's, else ``fallback``'s."""
        weight, strength = self.llm_weight, self.instruction_strength
        return QueryKnobs(
            fallback.llm_weight if weight is None else weight,
            fallback.instruction_strength if strength is None else strength,
        )

    def refused_by(self, encoder: Any) -> str | None:
        """The first knob given that ``encoder`` does not take (None: all taken)."""
        has = query_knob(encoder)
        return next((knob for knob in self.given() if knob != has), None)

    def require(self, encoder: Any) -> QueryKnobs:
        """These knobs, if ``encoder`` takes each one given; else a KnobError naming the model's own."""
        knob = self.refused_by(encoder)
        if knob is None:
            return self
        meaning, kind = MEANING[knob]
        raise KnobError(
            f"{knob}={self.given()[knob]}, but this model is {model_in_words(encoder)}: {knob} ({meaning}) "
            f"applies to {kind} only. Leave it out.",
            knob,
            code=f"{knob}_unsupported",
        )


@dataclass(frozen=True)
class Query:
    """A query's text (not blank), its instruction (normalised: None is none) and its knobs."""

    text: str
    instruction: str | None = None
    knobs: QueryKnobs = field(default_factory=QueryKnobs)

    @classmethod
    def checked(
        cls,
        text: Any,
        instruction: Any = None,
        llm_weight: Any = None,
        instruction_strength: Any = None,
        example: str | None = None,
    ) -> Query:
        """The query as it enters; ``example`` is shown in the refusal of an empty text."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyQueryError(f"{EMPTY_QUERY}{f', e.g. {example}' if example else ''}.")
        return cls(text, normalize_instruction(instruction), QueryKnobs.checked(llm_weight, instruction_strength))
