"""InstructionFusionRetriever: LlamaIndex's QueryFusionRetriever, with the instruction kept.

``QueryFusionRetriever(num_queries=3)`` asks its LLM for more queries and wraps each in a plain
``QueryBundle``: the instruction of the query they come from is lost, so the sub-queries are
embedded under the embedding model's default and the fused ranking drifts away from what was
asked. This subclass is the same retriever (same prompt, modes, weights, async) except that every
generated sub-query is an ``InstructionQueryBundle`` with the instruction (and a two-space model's
``llm_weight``, an instruction-effect model's ``instruction_strength``) of the original query:

    fusion = InstructionFusionRetriever([index.as_retriever(similarity_top_k=5)], llm=llm, num_queries=3)
    fusion.retrieve("best tent for storms", instruction="Focus on durability.")
    await fusion.aretrieve(InstructionQueryBundle(query_str="best tent", instruction="Focus on weight."))

The sub-retrievers may be LlamaIndex's own over an InstEmbEmbedding or InstEmbRetrievers.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from .query import InstructionQueryBundle, instruction_of, instruction_strength_of, llm_weight_of
from .retriever import _UNSET, bundle_with_instruction

# The instruction, llm_weight and instruction_strength of the query being fused. _get_queries
# receives the query string only, so _retrieve / _aretrieve set them here first; a context variable
# keeps concurrent calls (threads, asyncio tasks) apart.
_INSTRUCTION: ContextVar[tuple[str | None, float | None, float | None]] = ContextVar(
    "instemb_fusion_instruction", default=(None, None, None)
)


class InstructionFusionRetriever(QueryFusionRetriever):
    """QueryFusionRetriever whose generated sub-queries carry the original query's instruction.

    ``retrieve(query, instruction=..., llm_weight=..., instruction_strength=...)`` / ``aretrieve(...)``
    take an instruction (and a two-space model's llm_weight, an instruction-effect model's
    instruction_strength) as ``InstEmbRetriever`` does (None or left out: the
    embedding model's ``query_instruction``; "": none), or an ``InstructionQueryBundle``.
    """

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
        token = _INSTRUCTION.set(_instruction_of_bundle(query_bundle))
        try:
            return super()._retrieve(query_bundle)
        finally:
            _INSTRUCTION.reset(token)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        token = _INSTRUCTION.set(_instruction_of_bundle(query_bundle))
        try:
            return await super()._aretrieve(query_bundle)
        finally:
            _INSTRUCTION.reset(token)

    def _get_queries(self, original_query: str) -> list[QueryBundle]:
        return _carry_instruction(super()._get_queries(original_query))

    async def _aget_queries(self, original_query: str) -> list[QueryBundle]:
        return _carry_instruction(await super()._aget_queries(original_query))


def _instruction_of_bundle(query_bundle: Any) -> tuple[str | None, float | None, float | None]:
    instruction = getattr(query_bundle, "instruction", None)
    weight = getattr(query_bundle, "llm_weight", None)
    strength = getattr(query_bundle, "instruction_strength", None)
    if instruction is None:
        instruction = instruction_of(query_bundle.query_str)
    return (
        instruction,
        weight if weight is not None else llm_weight_of(query_bundle.query_str),
        strength if strength is not None else instruction_strength_of(query_bundle.query_str),
    )


def _carry_instruction(generated: list[QueryBundle]) -> list[QueryBundle]:
    instruction, weight, strength = _INSTRUCTION.get()
    if instruction is None and weight is None and strength is None:  # the original's defaults: so are these
        return generated
    return [
        InstructionQueryBundle(
            query_str=bundle.query_str, instruction=instruction, llm_weight=weight, instruction_strength=strength
        )
        for bundle in generated
    ]
