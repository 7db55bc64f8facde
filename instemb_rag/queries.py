"""A query as it enters: its text, its instruction and its query-time knobs, checked once where
they come in, and passed on typed, so that nothing on the way to the encoder checks them again.

The entries: the command line (cli/query.py), ``Index.search`` and ``Index.explain``, the
server's request bodies (serve/schemas.py validates the knobs; serve/errors.py answers a
``KnobError`` with a 400), and the LlamaIndex embedding's fields and calls. The encoder keeps its
own guard, for code that calls it directly.

    knobs = QueryKnobs.checked({name: value})             # declared and in range, else KnobError
    knobs.require(encoder)                                # a knob the model lacks: KnobError
    encoder.encode_queries(texts, instructions, **knobs)
    query = Query.checked("Which tent?", " ", knobs={name: value})   # instruction None: blank is none

The knobs, their ranges and their meanings are knobs.py's declarations. A model says which knobs
it takes (encoder/protocol.py ``query_knobs``: a RemoteEncoder from its server's model card); a
knob given to a model without it is refused, since it would silently change nothing. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .encoder.protocol import query_knob, query_knobs
from .errors import BadInputError, InstEmbError
from .instructions import normalize_instruction
from .knobs import KNOBS, KnobError, check_knobs

__all__ = [
    "EMPTY_QUERY",
    "EmptyQueryError",
    "KnobRefusedError",
    "Query",
    "QueryKnobs",
    "check_texts",
    "model_in_words",
    "refused_knob",
]

EMPTY_QUERY = "The query is empty: give the text to search for"


class EmptyQueryError(InstEmbError):
    """A query of no text (empty or whitespace)."""


def model_in_words(encoder: Any) -> str:
    """What the model is, by the query-time knob it takes (a refused knob's words before issue 68
    made ``refused_knob`` the one wording; kept for code that calls it)."""
    has = query_knob(encoder)
    if has is not None:
        return f"{KNOBS[has].model}, whose knob is {has}"
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


class QueryKnobs(Mapping):
    """A query's knobs: knob name -> value, each declared (knobs.py ``KNOBS``) and in range; a knob
    left out is the model's own. Build it with ``checked`` (a mapping, or the older keywords); a
    knob reads as an attribute too (``knobs.<name>``: its value or None)."""

    __slots__ = ("_values",)

    def __init__(self, *positional: float | None, **named: float | None):
        # Positional values in the declarations' order (the older form, one argument per knob).
        values = {**dict(zip(KNOBS, positional)), **named}
        self._values = {name: float(value) for name, value in values.items() if value is not None}

    @classmethod
    def checked(cls, *positional: Any, **named: Any) -> QueryKnobs:
        """One mapping (``checked({name: value})``), or values by name or in the declarations' order;
        in range, else KnobError (knobs.py)."""
        if len(positional) == 1 and isinstance(positional[0], QueryKnobs) and not named:
            return positional[0]  # checked where it entered
        if len(positional) == 1 and (positional[0] is None or isinstance(positional[0], Mapping)):
            return cls(**check_knobs({**(positional[0] or {}), **named}))
        return cls(**check_knobs({**dict(zip(KNOBS, positional)), **named}))

    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))

    def __getattr__(self, name: str) -> float | None:
        if name in KNOBS:
            return self._values.get(name)
        raise AttributeError(f"QueryKnobs has no attribute {name!r} (the knobs are {', '.join(KNOBS)}).")

    def __repr__(self) -> str:
        return f"QueryKnobs({self._values!r})"

    def given(self) -> dict[str, float]:
        """The knobs set, as keyword arguments of ``encode_queries`` and ``explain``."""
        return dict(self._values)

    def or_else(self, fallback: Mapping[str, float]) -> QueryKnobs:
        """Each knob: this one's, else ``fallback``'s."""
        return QueryKnobs(**{**fallback, **self._values})

    def refused_by(self, encoder: Any) -> str | None:
        """The first knob given that ``encoder`` does not take (None: all taken)."""
        taken = query_knobs(encoder)
        return next((knob for knob in self._values if knob not in taken), None)

    def require(self, encoder: Any) -> QueryKnobs:
        """These knobs, if ``encoder`` takes each one given; else refused (``refused_knob``)."""
        name = self.refused_by(encoder)
        if name is None:
            return self
        raise refused_knob(name, encoder)


class KnobRefusedError(KnobError, BadInputError):
    """A knob given to a model that lacks it: a ``KnobError`` (the server answers it with a 400
    naming the field) and bad input (the command line's exit code 2)."""


def refused_knob(
    name: str, encoder: Any, model_of: str = "this model", has: str | None | object = ...
) -> KnobRefusedError:
    """The one refusal of a knob the model lacks, in the words every entry point gives (the query
    service's, ``QueryKnobs.require``'s): what the knob sets, what the model is instead (by its own
    knob, ``has``: the encoder's unless given), and what to do. ``model_of`` names the model for
    the reader ("the model of this index" in a search)."""
    asked = KNOBS[name]
    has = query_knob(encoder) if has is ... else has
    if has is not None:
        other = f"{has} ({KNOBS[has].option})"
        model = f"{KNOBS[has].model}, whose query-time knob is {other}. Drop the option, or set {other} instead"
    else:
        side = getattr(encoder, "document_side", None)
        space = f" (documents embedded by {side.description})" if side is not None else ""
        model = f"not {asked.model}: it ranks by one space{space}, with no query-time knob to set. Drop the option"
    return KnobRefusedError(
        f"{name} ({asked.option}) {asked.sets}, but {model_of} is {model}.", name, f"{name}_unsupported"
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
        *values: Any,
        knobs: Mapping[str, Any] | None = None,
        example: str | None = None,
        **named: Any,
    ) -> Query:
        """The query as it enters: its knobs one mapping (``knobs=``; also by name, or the older
        positional values in the declarations' order); ``example`` is shown in the refusal of an
        empty text."""
        if not isinstance(text, str) or not text.strip():
            raise EmptyQueryError(f"{EMPTY_QUERY}{f', e.g. {example}' if example else ''}.")
        given = {**dict(zip(KNOBS, values)), **(knobs or {}), **named}
        return cls(text, normalize_instruction(instruction), QueryKnobs.checked(given))
