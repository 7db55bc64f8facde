"""InstEmbRetriever over VectorStoreIndex + FAISS / Qdrant, with the tiny random model.

Expected rankings are computed directly with the encoder (query under the instruction vs.
documents without one), so these tests prove the call's instruction reaches the encoder and
the store returns the nodes in that order.
"""

from __future__ import annotations

import asyncio
import uuid

import faiss
import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters
from llama_index.vector_stores.faiss import FaissVectorStore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from instemb_rag import InstEmbEncoder
from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever, InstructionQueryBundle

QUERY = "which tent is good for a camp trip ?"
INSTRUCTIONS = ("focus on weight", "focus on durability")


def build_index(embed_model, docs, store_kind: str, tmp_path=None) -> VectorStoreIndex:
    # Qdrant wants UUID point ids, so the readable name travels in the metadata.
    nodes = [
        TextNode(
            text=text,
            id_=str(uuid.uuid5(uuid.NAMESPACE_URL, f"doc{i}")),
            metadata={"name": f"doc{i}", "kind": "tent" if "tent" in text else "other"},
        )
        for i, text in enumerate(docs)
    ]
    if store_kind == "faiss":
        store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(embed_model.dimension))
    elif store_kind == "qdrant-memory":
        store = QdrantVectorStore(collection_name="docs", client=QdrantClient(location=":memory:"))
    else:
        store = QdrantVectorStore(collection_name="docs", client=QdrantClient(path=str(tmp_path / "qdrant")))
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=embed_model)


def names(results) -> list[str]:
    return [item.node.metadata["name"] for item in results]


def expected_order(embed_model, docs, instruction) -> list[str]:
    encoder = embed_model.encoder
    scores = encoder.encode_documents(docs) @ encoder.encode_queries([QUERY], instruction)[0]
    return [f"doc{i}" for i in np.argsort(-scores)]


@pytest.mark.parametrize("store_kind", ["faiss", "qdrant-memory", "qdrant-path"])
def test_ranking_follows_the_instruction_of_each_call(tiny_embed_model, tiny_docs, store_kind, tmp_path):
    index = build_index(tiny_embed_model, tiny_docs, store_kind, tmp_path)
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=len(tiny_docs))
    orders = []
    for instruction in INSTRUCTIONS:
        results = retriever.retrieve(QUERY, instruction=instruction)
        assert all(isinstance(item, NodeWithScore) for item in results)
        got = names(results)
        assert got == expected_order(tiny_embed_model, tiny_docs, instruction)
        scores = [item.score for item in results]
        assert scores == sorted(scores, reverse=True)
        orders.append((got, scores))
    assert orders[0][1] != orders[1][1], "two instructions gave identical scores"


def test_default_instruction_and_no_instruction(tiny_embed_model, tiny_docs):
    index = build_index(tiny_embed_model, tiny_docs, "faiss")
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)
    plain = names(retriever.retrieve(QUERY))
    assert plain == expected_order(tiny_embed_model, tiny_docs, tiny_embed_model.query_instruction)
    bare = names(retriever.retrieve(QUERY, instruction=""))
    assert bare == expected_order(tiny_embed_model, tiny_docs, None)


def test_async_retrieve_matches_sync(tiny_embed_model, tiny_docs):
    for store_kind in ("faiss", "qdrant-memory"):
        retriever = InstEmbRetriever.from_vector_store_index(
            build_index(tiny_embed_model, tiny_docs, store_kind), similarity_top_k=3
        )

        async def both(retriever=retriever):
            return await asyncio.gather(*(retriever.aretrieve(QUERY, instruction=i) for i in INSTRUCTIONS))

        async_results = asyncio.run(both())
        for instruction, results in zip(INSTRUCTIONS, async_results):
            sync = retriever.retrieve(QUERY, instruction=instruction)
            assert names(results) == names(sync)
            np.testing.assert_allclose([n.score for n in results], [n.score for n in sync], atol=1e-5)


def test_query_bundles_and_llamaindex_own_retriever(tiny_embed_model, tiny_docs):
    index = build_index(tiny_embed_model, tiny_docs, "faiss")
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5)
    durability = expected_order(tiny_embed_model, tiny_docs, INSTRUCTIONS[1])
    # An InstructionQueryBundle without embedding is embedded under its instruction.
    bundle = InstructionQueryBundle(query_str=QUERY, instruction=INSTRUCTIONS[1])
    assert names(retriever.retrieve(bundle)) == durability
    # A plain QueryBundle plus instruction= works as well.
    plain = QueryBundle(query_str=QUERY)
    assert names(retriever.retrieve(plain, instruction=INSTRUCTIONS[1])) == durability
    # LlamaIndex's own retriever uses a precomputed bundle embedding as is.
    own = index.as_retriever(similarity_top_k=5).retrieve(tiny_embed_model.query_bundle(QUERY, INSTRUCTIONS[1]))
    assert names(own) == durability
    with pytest.raises(InstEmbError, match="already carries an embedding"):
        retriever.retrieve(tiny_embed_model.query_bundle(QUERY, INSTRUCTIONS[0]), instruction=INSTRUCTIONS[1])


def test_metadata_filters_reach_the_store(tiny_embed_model, tiny_docs):
    index = build_index(tiny_embed_model, tiny_docs, "qdrant-memory")
    filters = MetadataFilters(filters=[MetadataFilter(key="kind", value="tent")])
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=5, filters=filters)
    results = retriever.retrieve(QUERY, instruction=INSTRUCTIONS[0])
    assert set(names(results)) == {"doc0", "doc3"}


def test_index_from_another_model_is_refused(tiny_embed_model, tiny_model_dir, tiny_docs):
    foreign = VectorStoreIndex([TextNode(text=t) for t in tiny_docs], embed_model=MockEmbedding(embed_dim=64))
    with pytest.raises(InstEmbError, match="MockEmbedding"):
        InstEmbRetriever.from_vector_store_index(foreign)
    # Same base weights but different look-ahead length → different fingerprint.
    other = InstEmbEmbedding.from_encoder(
        InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2, max_length=64)
    )
    index = build_index(tiny_embed_model, tiny_docs, "faiss")
    with pytest.raises(InstEmbError, match="re-index"):
        InstEmbRetriever.from_vector_store_index(index, embed_model=other)
