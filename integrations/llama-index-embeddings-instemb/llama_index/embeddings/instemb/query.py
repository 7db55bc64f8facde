"""A query that says which instruction (and knobs) it is to be read under, through LlamaIndex.

LlamaIndex's retrievers hand an embedding model a bundle's strings only, so the instruction rides on
them: ``InstructionQueryBundle.embedding_strs`` are ``InstructedText``s, which InstEmbEmbedding embeds
under the instruction and knobs (a two-space model's ``llm_weight``, an instruction-effect model's
``instruction_strength``) each carries; a stock retriever or query engine thus embeds a bundle as
asked. Both check what they carry when made (instemb_rag.queries); the embedding adds the model's check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import NodeWithScore, QueryBundle

from instemb_rag import normalize_instruction
from instemb_rag.errors import InstEmbError
from instemb_rag.queries import QueryKnobs

_UNSET: Any = object()  # an instruction not given (None is one: the embedding's query_instruction)


class InstructedText(str):
    """A query string carrying its instruction (None: the embedding's ``query_instruction``; "": none)
    and knobs (None: the embedding's own) through code that passes plain strings."""

    def __new__(
        cls,
        text: str,
        instruction: str | None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> InstructedText:
        made = super().__new__(cls, text)
        made.instruction, made.knobs = instruction, QueryKnobs.checked(llm_weight, instruction_strength)
        return made

    llm_weight = property(lambda self: self.knobs.llm_weight)
    instruction_strength = property(lambda self: self.knobs.instruction_strength)

    def __reduce__(self):
        return InstructedText, (str(self), self.instruction, self.llm_weight, self.instruction_strength)


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
        knobs = QueryKnobs.checked(self.llm_weight, self.instruction_strength)
        self.llm_weight, self.instruction_strength = knobs.llm_weight, knobs.instruction_strength

    @property
    def knobs(self) -> QueryKnobs:
        return QueryKnobs(self.llm_weight, self.instruction_strength)

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
            "query string with instruction=... (and llm_weight=... or instruction_strength=...), or a bundle "
            "without an embedding."
        )
    own = {"instruction": query.instruction, **query.knobs.given()} if isinstance(query, InstructionQueryBundle) else {}
    return InstructionQueryBundle(
        query.query_str, custom_embedding_strs=query.custom_embedding_strs, **{**own, **given}
    )


class TakesInstructions:
    """``retrieve`` / ``aretrieve`` of a LlamaIndex retriever that also take an instruction (None: the
    embedding's ``query_instruction``; "": none) and knobs (``llm_weight``: a two-space model's LLM
    share, 0..1; ``instruction_strength``: an instruction-effect model's, 0..10), for this call."""

    def retrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        knobs = {"llm_weight": llm_weight, "instruction_strength": instruction_strength}
        return super().retrieve(bundle_with_instruction(query, instruction, **knobs))

    async def aretrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        knobs = {"llm_weight": llm_weight, "instruction_strength": instruction_strength}
        return await super().aretrieve(bundle_with_instruction(query, instruction, **knobs))
