"""A QueryBundle that also says which instruction the query is to be read under.

LlamaIndex's retrievers hand an embedding model the bundle's strings only
(``embed_model.get_agg_embedding_from_queries(bundle.embedding_strs)``), so the instruction rides
on the strings themselves: ``InstructionQueryBundle.embedding_strs`` are ``InstructedText``s, and
InstEmbEmbedding embeds each under the instruction it carries. A stock VectorIndexRetriever or
query engine over an InstEmbEmbedding therefore embeds the bundle under its instruction. A
two-space model's ``llm_weight`` (the LLM space's share of the score) and an instruction-effect
model's ``instruction_strength`` (how much the instruction moves the ranking) ride along the same way.

Both are entries: a bundle's instruction must be text, and the knobs of a bundle or an
InstructedText are checked in range when it is made (instemb_rag.queries), and carried typed
(``InstructedText.knobs``) to the embedding call, which adds only the model's own check.
"""

from __future__ import annotations

from dataclasses import dataclass

from llama_index.core.schema import QueryBundle

from instemb_rag import normalize_instruction
from instemb_rag.queries import QueryKnobs


class InstructedText(str):
    """A query string that carries its instruction through code that passes plain strings.

    ``instruction``: None means "the embedding model's query_instruction"; "" means none at all.
    ``llm_weight``: a two-space model's LLM share for this query (None: the embedding's own).
    ``instruction_strength``: an instruction-effect model's strength for this query (None: the embedding's own).
    """

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
    """The instruction a query string carries (None: the embedding model's default)."""
    return getattr(text, "instruction", None)


def llm_weight_of(text: str) -> float | None:
    """The llm_weight a query string carries (None: the embedding model's default)."""
    return getattr(text, "llm_weight", None)


def instruction_strength_of(text: str) -> float | None:
    """The instruction_strength a query string carries (None: the embedding model's default)."""
    return getattr(text, "instruction_strength", None)


def knobs_of(text: str) -> QueryKnobs:
    """The knobs a query string carries, checked when it was made (none: the embedding model's)."""
    return getattr(text, "knobs", None) or QueryKnobs()


@dataclass
class InstructionQueryBundle(QueryBundle):
    """QueryBundle + ``instruction`` (None: the embedding model's ``query_instruction``; "": none).

    Without an embedding, every LlamaIndex retriever over an ``InstEmbEmbedding`` embeds the
    bundle's strings under ``instruction`` (several strings, e.g. HyDE's, are embedded in one
    batch and averaged). ``InstEmbEmbedding.query_bundle`` returns one that carries its finished
    embedding. ``llm_weight``: a two-space model's LLM share of the score (None: the embedding's own).
    ``instruction_strength``: an instruction-effect model's strength (None: the embedding's own).
    """

    instruction: str | None = None
    llm_weight: float | None = None
    instruction_strength: float | None = None

    def __post_init__(self) -> None:
        if self.instruction is not None:
            normalize_instruction(self.instruction)  # refuses a non-string with a clear message
        knobs = QueryKnobs.checked(self.llm_weight, self.instruction_strength)
        self.llm_weight, self.instruction_strength = knobs.llm_weight, knobs.instruction_strength

    @property
    def embedding_strs(self) -> list[str]:
        strings = super().embedding_strs
        if self.instruction is None and self.llm_weight is None and self.instruction_strength is None:
            return strings
        return [InstructedText(text, self.instruction, self.llm_weight, self.instruction_strength) for text in strings]
