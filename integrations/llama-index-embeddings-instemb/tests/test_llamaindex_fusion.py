"""InstructionFusionRetriever: the LLM's sub-queries are embedded under the original query's instruction.

A stub LLM returns two fixed sub-queries, so the expected fused scores can be computed with the
encoder: in the default (simple) mode a node's fused score is its best score over the original
query and the two sub-queries, every one embedded under the instruction.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faiss
import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import TextNode
from llama_index.vector_stores.faiss import FaissVectorStore

from llama_index.embeddings.instemb import InstEmbRetriever, InstructionFusionRetriever, InstructionQueryBundle

QUERY = "which tent is good for a camp trip ?"
SUB_QUERIES = ["a light tent for rain .", "what stove is durable ?"]
DURABILITY = "focus on durability"


class FixedSubQueries(CustomLLM):
    """Answers every prompt with the same sub-queries, one per line (as the fusion prompt asks)."""

    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text="\n".join(SUB_QUERIES))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


@pytest.fixture()
def index(tiny_embed_model, tiny_docs) -> VectorStoreIndex:
    nodes = [TextNode(text=text, id_=f"doc{i}") for i, text in enumerate(tiny_docs)]
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(tiny_embed_model.dimension))
    return VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=tiny_embed_model
    )


def fused(embed_model, docs, instruction) -> dict[str, float]:
    encoder = embed_model.encoder
    scores = encoder.encode_documents(docs) @ encoder.encode_queries([QUERY, *SUB_QUERIES], instruction).T
    return {f"doc{i}": float(best) for i, best in enumerate(scores.max(axis=1))}


def scores(results) -> dict[str, float]:
    return {item.node.node_id: item.score for item in results}


def assert_fused(results, expected) -> None:
    got = scores(results)
    assert sorted(got) == sorted(expected)
    np.testing.assert_allclose([got[name] for name in expected], list(expected.values()), atol=1e-4)
    assert list(got) == sorted(expected, key=expected.get, reverse=True)


@pytest.mark.parametrize("use_async", [True, False])
def test_sub_queries_carry_the_instruction(tiny_embed_model, tiny_docs, index, use_async):
    llm = FixedSubQueries(prompts=[])
    expected = fused(tiny_embed_model, tiny_docs, DURABILITY)
    # Under the embedding's default instruction the fused ranking is another one: what is at stake.
    assert expected != fused(tiny_embed_model, tiny_docs, tiny_embed_model.query_instruction)
    for retriever in (index.as_retriever(similarity_top_k=5), InstEmbRetriever.from_vector_store_index(index)):
        fusion = InstructionFusionRetriever(
            [retriever], llm=llm, num_queries=3, similarity_top_k=5, use_async=use_async
        )
        assert_fused(fusion.retrieve(QUERY, instruction=DURABILITY), expected)
        assert_fused(fusion.retrieve(InstructionQueryBundle(query_str=QUERY, instruction=DURABILITY)), expected)
        assert_fused(fusion.retrieve(tiny_embed_model.query_bundle(QUERY, DURABILITY)), expected)

        async def in_a_running_loop(fusion=fusion):
            return await fusion.aretrieve(QUERY, instruction=DURABILITY), fusion.retrieve(QUERY, instruction=DURABILITY)

        for results in asyncio.run(in_a_running_loop()):
            assert_fused(results, expected)
    assert QUERY in llm.prompts[0]


def test_without_an_instruction_sub_queries_use_the_default_and_calls_stay_apart(tiny_embed_model, tiny_docs, index):
    fusion = InstructionFusionRetriever(
        [index.as_retriever(similarity_top_k=5)], llm=FixedSubQueries(prompts=[]), num_queries=3, similarity_top_k=5
    )
    default = fused(tiny_embed_model, tiny_docs, tiny_embed_model.query_instruction)
    assert_fused(fusion.retrieve(QUERY), default)
    bare = fused(tiny_embed_model, tiny_docs, None)
    assert_fused(fusion.retrieve(QUERY, instruction=""), bare)  # "" = no instruction, for the sub-queries too

    async def concurrently():
        return await asyncio.gather(
            *(fusion.aretrieve(QUERY, instruction=instruction) for instruction in (DURABILITY, "", None) * 2)
        )

    durability = fused(tiny_embed_model, tiny_docs, DURABILITY)
    for results, expected in zip(asyncio.run(concurrently()), (durability, bare, default) * 2):
        assert_fused(results, expected)
