"""qdrant_vector_store(): stock LlamaIndex async retrieval and fusion work over it, and close() closes.

Local mode (":memory:", a path) is what runs here; a Qdrant server gets qdrant-client's
AsyncQdrantClient beside the sync one (qdrant_store.py), which needs a server to test.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import TextNode

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbRetriever, qdrant_vector_store

QUERY = "which tent is good for a camp trip ?"


def nodes_of(docs) -> list[TextNode]:
    return [TextNode(text=text, id_=str(uuid.uuid5(uuid.NAMESPACE_URL, f"doc{i}"))) for i, text in enumerate(docs)]


def ranked(results) -> list[tuple[str, float]]:
    return [(item.node.node_id, round(item.score, 5)) for item in results]


def client_options(mode, tmp_path) -> dict:
    return {"location": ":memory:"} if mode == "memory" else {"path": str(tmp_path / "qdrant")}


@pytest.mark.parametrize("mode", ["memory", "path"])
def test_stock_async_retrieval_ingestion_and_fusion_work(tiny_embed_model, tiny_docs, mode, tmp_path):
    with qdrant_vector_store("docs", **client_options(mode, tmp_path)) as store:
        # use_async=True ingests through the store's async_add.
        index = VectorStoreIndex(
            nodes_of(tiny_docs),
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=tiny_embed_model,
            use_async=True,
        )
        stock = index.as_retriever(similarity_top_k=5)
        expected = ranked(stock.retrieve(QUERY))
        assert len(expected) == len(tiny_docs)
        fusion = QueryFusionRetriever([stock], llm=MockLLM(), similarity_top_k=5, num_queries=1, use_async=True)
        ours = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)

        async def in_a_running_loop():
            # As in Jupyter or a web handler: awaited calls, and a sync fusion call inside the loop.
            return (
                await stock.aretrieve(QUERY),
                await fusion.aretrieve(QUERY),
                fusion.retrieve(QUERY),
                await ours.aretrieve(QUERY),
                *await asyncio.gather(*(stock.aretrieve(QUERY) for _ in range(3))),
            )

        for results in asyncio.run(in_a_running_loop()):
            assert ranked(results) == expected


def test_close_frees_the_folder_and_keeps_the_points(tiny_embed_model, tiny_docs, tmp_path):
    options = client_options("path", tmp_path)
    store = qdrant_vector_store("docs", **options)
    index = VectorStoreIndex(
        nodes_of(tiny_docs),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=tiny_embed_model,
    )
    expected = ranked(index.as_retriever(similarity_top_k=5).retrieve(QUERY))
    with pytest.raises(InstEmbError, match=r"still open.*store\.close\(\)"):
        qdrant_vector_store("docs", **options)
    store.close()
    store.close()  # twice is harmless

    async def reopen_async():
        async with qdrant_vector_store("docs", **options) as reopened:
            again = VectorStoreIndex.from_vector_store(reopened, embed_model=tiny_embed_model)
            return await again.as_retriever(similarity_top_k=5).aretrieve(QUERY)

    assert ranked(asyncio.run(reopen_async())) == expected
    with qdrant_vector_store("docs", **options) as reopened_again:  # aclose freed it too
        assert reopened_again.is_local
