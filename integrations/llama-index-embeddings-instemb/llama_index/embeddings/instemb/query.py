"""A query that says which instruction (and knobs) it is to be read under, through LlamaIndex.

LlamaIndex's retrievers hand an embedding model a bundle's strings only, so the instruction rides on
them: ``InstructionQueryBundle.embedding_strs`` are ``InstructedText``s, which InstEmbEmbedding embeds
under the instruction and query-time knobs (instemb_rag.knobs) each carries; a stock retriever or query engine thus embeds a bundle as
asked. Both check what they carry when made (instemb_rag.queries); the embedding adds the model's check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import NodeWithScore, QueryBundle

from instemb_rag import normalize_instruction
from instemb_rag.errors import InstEmbError
from instemb_rag.knobs import KNOBS
from instemb_rag.queries import QueryKnobs

_UNSET: Any = object()  # an instruction not given (None is one: the embedding's query_instruction)


class InstructedText(str):
    """A query string carrying its instruction (None: the embedding's ``query_instruction``; "": none)
    and knobs (None: the embedding's own) through code that passes plain strings."""

    def __new__(
        cls,
        text: str,
        instruction: str | None,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> InstructedText:
        made = super().__new__(cls, text)
        made.instruction, made.knobs = instruction, QueryKnobs.checked({**(knobs or {}), **named_knobs})
        return made

    def __getattr__(self, name: str) -> float | None:
        if name in KNOBS:  # a knob by its name: its value or None
            return getattr(self.knobs, name)
        raise AttributeError(f"InstructedText has no attribute {name!r}")

    def __reduce__(self):
        return InstructedText, (str(self), self.instruction, dict(self.knobs))


def instruction_of(text: str) -> str | None:
    """The instruction a query string carries (None: the embedding's default)."""
    return text.instruction if isinstance(text, InstructedText) else None


def knobs_of(text: str) -> QueryKnobs:
    """The knobs a query string carries (none: the embedding's)."""
    return text.knobs if isinstance(text, InstructedText) else QueryKnobs()


@dataclass
class InstructionQueryBundle(QueryBundle):
    """QueryBundle + ``instruction`` (None: the embedding's ``query_instruction``; "": none) and knobs
    (None: the embedding's own). Without an embedding, every retriever over an InstEmbEmbedding embeds
    its strings so (several, e.g. HyDE's, in one batch, averaged)."""

    instruction: str | None = None
    llm_weight: float | None = None
    instruction_strength: float | None = None

    def __post_init__(self) -> None:
        if self.instruction is not None:
            normalize_instruction(self.instruction)  # refuses a non-string with a clear message
        for name, value in QueryKnobs.checked({name: getattr(self, name) for name in KNOBS}).items():
            setattr(self, name, value)  # in range, as a float

    @property
    def knobs(self) -> QueryKnobs:
        return QueryKnobs(**{name: getattr(self, name) for name in KNOBS})

    @property
    def embedding_strs(self) -> list[str]:
        strings = super().embedding_strs
        if self.instruction is None and not self.knobs.given():
            return strings
        return [InstructedText(text, self.instruction, **self.knobs.given()) for text in strings]


def bundle_with_instruction(query: Any, instruction: Any = _UNSET, **knobs: float | None) -> QueryBundle:
    """The query with a call's instruction and knobs; what the call gives wins over the bundle's own."""
    if not isinstance(query, (str, QueryBundle)):
        raise InstEmbError(f"query must be a string or a QueryBundle, got {type(query).__name__}.")
    given = {name: value for name, value in knobs.items() if value is not None}
    if instruction is not _UNSET:
        given["instruction"] = instruction
    if isinstance(query, str):
        return InstructionQueryBundle(query_str=query, **given)
    if not given:
        return query
    if query.embedding is not None:
        raise InstEmbError(
            f"The QueryBundle already carries an embedding, so {' and '.join(given)} cannot change it. Pass the "
            f"query string with instruction=... (and knobs={{{', '.join(map(repr, KNOBS))}: ...}}), or a bundle "
            "without an embedding."
        )
    own = {"instruction": query.instruction, **query.knobs.given()} if isinstance(query, InstructionQueryBundle) else {}
    return InstructionQueryBundle(
        query.query_str, custom_embedding_strs=query.custom_embedding_strs, **{**own, **given}
    )


class TakesInstructions:
    """``retrieve`` / ``aretrieve`` of a LlamaIndex retriever that also take an instruction (None: the
    embedding's ``query_instruction``; "": none) and query-time knobs (``knobs``, name -> value, or
    by name; instemb_rag.knobs), for this call."""

    def retrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> list[NodeWithScore]:
        return super().retrieve(bundle_with_instruction(query, instruction, **(knobs or {}), **named_knobs))

    async def aretrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        knobs: Mapping[str, float | None] | None = None,
        **named_knobs: float | None,
    ) -> list[NodeWithScore]:
        return await super().aretrieve(bundle_with_instruction(query, instruction, **(knobs or {}), **named_knobs))
