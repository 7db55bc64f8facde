"""The index-folder retriever from several threads and from a running event loop (as in Jupyter)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever

from llama_index.embeddings.instemb import InstEmbRetriever

index_api = pytest.importorskip("instemb_rag.index", reason="instemb_rag.index is not available")

QUERY = "which tent is good for a camp trip ?"
INSTRUCTIONS = ("focus on weight", "focus on durability", "")


def ranking(nodes) -> list[tuple[str, float]]:
    return [(node.node.metadata["source"], round(node.score, 5)) for node in nodes]


def test_index_folder_retriever_serves_a_thread_pool(index_dir, tiny_embed_model):
    with InstEmbRetriever.from_instemb_index(index_dir, embed_model=tiny_embed_model, similarity_top_k=5) as retriever:
        expected = {
            instruction: ranking(retriever.retrieve(QUERY, instruction=instruction)) for instruction in INSTRUCTIONS
        }
        calls = [INSTRUCTIONS[i % len(INSTRUCTIONS)] for i in range(24)]
        with ThreadPoolExecutor(max_workers=6) as pool:
            got = list(pool.map(lambda instruction: ranking(retriever.retrieve(QUERY, instruction=instruction)), calls))
        assert got == [expected[instruction] for instruction in calls]

        async def from_worker_threads():
            return await asyncio.gather(
                *(asyncio.to_thread(retriever.retrieve, QUERY, instruction=instruction) for instruction in INSTRUCTIONS)
            )

        threaded = asyncio.run(from_worker_threads())
        assert [ranking(nodes) for nodes in threaded] == [expected[instruction] for instruction in INSTRUCTIONS]


def test_query_fusion_inside_a_running_loop(index_dir, tiny_embed_model):
    """QueryFusionRetriever(use_async=True) called from a running loop (a notebook cell) runs the
    retrievers' aretrieve on a loop in another thread than the one that opened the index."""
    with InstEmbRetriever.from_instemb_index(index_dir, embed_model=tiny_embed_model, similarity_top_k=3) as retriever:
        fusion = QueryFusionRetriever([retriever], llm=MockLLM(), num_queries=1, use_async=True, similarity_top_k=3)
        direct = [node.node.node_id for node in retriever.retrieve(QUERY)]

        async def cell():
            return fusion.retrieve(QUERY)  # sync API inside a running loop, as Jupyter users call it

        fused = asyncio.run(cell())
        assert [node.node.node_id for node in fused] == direct
