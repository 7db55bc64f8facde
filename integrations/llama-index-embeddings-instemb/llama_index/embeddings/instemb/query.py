"""A query that says which instruction (and knobs) it is to be read under, through LlamaIndex.

LlamaIndex hands an embedding model (and a fusion retriever its LLM) a bundle's strings only, so the
instruction rides on them: an ``InstructionQueryBundle``'s query and embedding strings are
``InstructedText``s (instemb_rag.client.carried), which InstEmbEmbedding embeds under the instruction
and query-time knobs each carries; a stock retriever or query engine thus embeds a bundle as asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import NodeWithScore, QueryBundle

from instemb_rag import normalize_instruction
from instemb_rag.client import carried
from instemb_rag.client.carried import UNSET as _UNSET
from instemb_rag.client.carried import InstructedText, Knobs, instruction_of, knobs_of
from instemb_rag.errors import InstEmbError
from instemb_rag.knobs import KNOBS
from instemb_rag.queries import QueryKnobs


@dataclass
class InstructionQueryBundle(QueryBundle):
    """QueryBundle + ``instruction`` (None: the embedding's ``query_instruction``; "": none) and knobs
    (None: the embedding's own). Without an embedding, every retriever over an InstEmbEmbedding embeds
    its strings so (several, e.g. HyDE's, in one batch, averaged)."""

    instruction: str | None = None
    llm_weight: float | None = None
    instruction_strength: float | None = None

    def __post_init__(self) -> None:
        normalize_instruction(self.instruction)  # refuses a non-string with a clear message
        carried.check_held_knobs(self)  # in range, as floats
        self.query_str = self._carrying(self.query_str)  # for code that reads the string only (fusion)

    knobs = property(carried.held_knobs, doc="The knobs given (QueryKnobs; a knob left out: the embedding's own).")

    @property
    def embedding_strs(self) -> list[str]:
        return [self._carrying(text) for text in super().embedding_strs]

    def _carrying(self, text: str) -> InstructedText:
        instruction = instruction_of(text) if self.instruction is None else self.instruction
        return InstructedText(text, instruction, {**knobs_of(text), **self.knobs})


def bundle_with_instruction(query: Any, instruction: Any = _UNSET, **knobs: float | None) -> QueryBundle:
    """The query with a call's instruction and knobs; what the call gives wins over the bundle's own."""
    if not isinstance(query, (str, QueryBundle)):
        raise InstEmbError(f"query must be a string or a QueryBundle, got {type(query).__name__}.")
    given = {**QueryKnobs.checked(knobs), **({} if instruction is _UNSET else {"instruction": instruction})}
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
    own = carried.carried_by(query.query_str)  # (a bundle's are on it)
    text = str(query.query_str)  # without them: the call's replace them
    return InstructionQueryBundle(text, custom_embedding_strs=query.custom_embedding_strs, **{**own, **given})


class TakesInstructions:
    """``retrieve`` / ``aretrieve`` of a LlamaIndex retriever that also take an instruction (None: the
    embedding's ``query_instruction``; "": none) and query-time knobs (``knobs``, or by name), for this call."""

    def retrieve(
        self, query: str | QueryBundle, instruction: Any = _UNSET, knobs: Knobs = None, **named_knobs: float | None
    ) -> list[NodeWithScore]:
        return super().retrieve(bundle_with_instruction(query, instruction, **(knobs or {}), **named_knobs))

    async def aretrieve(
        self, query: str | QueryBundle, instruction: Any = _UNSET, knobs: Knobs = None, **named_knobs: float | None
    ) -> list[NodeWithScore]:
        return await super().aretrieve(bundle_with_instruction(query, instruction, **(knobs or {}), **named_knobs))
