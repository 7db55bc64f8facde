"""InstructionFusionRetriever: LlamaIndex's QueryFusionRetriever, with the instruction kept.

``QueryFusionRetriever(num_queries=3)`` asks its LLM for more queries and wraps each in a plain
QueryBundle: the instruction of the query they come from is lost, so the sub-queries are embedded
under the embedding's default and the fused ranking drifts from what was asked. This subclass is
the same retriever (prompt, modes, weights, async) whose generated sub-queries are
``InstructionQueryBundle``s with the original query's instruction and knobs:

    fusion = InstructionFusionRetriever([index.as_retriever(similarity_top_k=5)], llm=llm, num_queries=3)
    fusion.retrieve("best tent for storms", instruction="Focus on durability.")
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from instemb_rag.queries import QueryKnobs

from .query import InstructionQueryBundle, instruction_of, knobs_of
from .retriever import _UNSET, bundle_with_instruction

# The instruction and knobs of the query being fused: _get_queries receives the query string only,
# so _retrieve / _aretrieve set them here first; a context variable keeps concurrent calls apart.
_FUSED: ContextVar[tuple[str | None, QueryKnobs]] = ContextVar("instemb_fusion_query", default=(None, QueryKnobs()))


class InstructionFusionRetriever(QueryFusionRetriever):
    """QueryFusionRetriever whose sub-queries carry the original query's instruction and knobs; its
    ``retrieve`` / ``aretrieve`` take them as ``InstEmbRetriever``'s do (None: the embedding's own;
    "": no instruction), or an ``InstructionQueryBundle``. The sub-retrievers may be LlamaIndex's
    own over an InstEmbEmbedding, or InstEmbRetrievers."""

    def retrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        return super().retrieve(bundle_with_instruction(query, instruction, llm_weight, instruction_strength))

    async def aretrieve(
        self,
        query: str | QueryBundle,
        instruction: str | None = _UNSET,
        llm_weight: float | None = None,
        instruction_strength: float | None = None,
    ) -> list[NodeWithScore]:
        return await super().aretrieve(bundle_with_instruction(query, instruction, llm_weight, instruction_strength))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        token = _FUSED.set(_carried(query_bundle))
        try:
            return super()._retrieve(query_bundle)
        finally:
            _FUSED.reset(token)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        token = _FUSED.set(_carried(query_bundle))
        try:
            return await super()._aretrieve(query_bundle)
        finally:
            _FUSED.reset(token)

    def _get_queries(self, original_query: str) -> list[QueryBundle]:
        return _carry(super()._get_queries(original_query))

    async def _aget_queries(self, original_query: str) -> list[QueryBundle]:
        return _carry(await super()._aget_queries(original_query))


def _carried(bundle: Any) -> tuple[str | None, QueryKnobs]:
    """The bundle's instruction and knobs, else those its query string carries."""
    text = bundle.query_str
    if not isinstance(bundle, InstructionQueryBundle):
        return instruction_of(text), knobs_of(text)
    instruction = instruction_of(text) if bundle.instruction is None else bundle.instruction
    return instruction, bundle.knobs.or_else(knobs_of(text))


def _carry(generated: list[QueryBundle]) -> list[QueryBundle]:
    instruction, knobs = _FUSED.get()
    if instruction is None and not knobs.given():  # the original's defaults: so are these
        return generated
    return [InstructionQueryBundle(bundle.query_str, instruction=instruction, **knobs.given()) for bundle in generated]
