"""A QueryBundle that also says which instruction the query is to be read under.

LlamaIndex's retrievers hand an embedding model the bundle's strings only, so the instruction rides
on the strings: ``InstructionQueryBundle.embedding_strs`` are ``InstructedText``s, which
InstEmbEmbedding embeds under the instruction (and the knobs: a two-space model's ``llm_weight``,
an instruction-effect model's ``instruction_strength``) each carries. A stock VectorIndexRetriever
or query engine over an InstEmbEmbedding therefore embeds the bundle as asked. Both check what they
carry when made (instemb_rag.queries), so the embedding call adds only the model's own check.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import QueryBundle

from instemb_rag import normalize_instruction
from instemb_rag.queries import QueryKnobs


class InstructedText(str):
    """A query string that carries its instruction (None: the embedding's ``query_instruction``;
    "": none) and its knobs (None: the embedding's own) through code that passes plain strings."""

    instruction: str | None
    knobs: QueryKnobs

    def __new__(
        cls,
        text: str,
        instruction: str | None,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> InstructedText:
        made = super().__new__(cls, text)
        made.instruction = instruction
        made.knobs = QueryKnobs.checked(llm_weight, instruction_strength)
        return made

    @property
    def llm_weight(self) -> float | None:
        return self.knobs.llm_weight

    @property
    def instruction_strength(self) -> float | None:
        return self.knobs.instruction_strength

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
    """QueryBundle + ``instruction`` (None: the embedding's ``query_instruction``; "": none) and the
    knobs ``llm_weight``, ``instruction_strength`` (None: the embedding's own). Without an embedding,
    every LlamaIndex retriever over an InstEmbEmbedding embeds its strings so (several, e.g. HyDE's,
    in one batch, averaged); ``InstEmbEmbedding.query_bundle`` returns one with its embedding."""

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
