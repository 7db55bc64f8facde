"""End to end through LlamaIndex with the real default model (slow): documents are embedded
by VectorStoreIndex, stored in FAISS or Qdrant, and retrieved under two instructions."""

from __future__ import annotations

import asyncio

import faiss
import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.vector_stores.faiss import FaissVectorStore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from llama_index.embeddings.instemb import InstEmbRetriever

pytestmark = pytest.mark.slow

DOCS = {
    "light-tent": "The Ridgeline 2 tent weighs only 1.1 kg and packs to the size of a water bottle.",
    "strong-tent": "The Stormhold tent has reinforced poles and survived 90 km/h winds in our field test.",
    "stove": "Canister stoves boil water quickly but struggle in freezing temperatures.",
    "backpack": "A 40-litre backpack with a padded hip belt fits a weekend of gear.",
}
QUERY = "Which tent should I buy for a mountain trip?"
WEIGHT = "Find documents about how light and small the gear is."
DURABILITY = "Find documents about how strong and durable the gear is in bad weather."


def build_index(embed_model, store_kind: str) -> VectorStoreIndex:
    if store_kind == "faiss":
        store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(embed_model.dimension))
    else:
        store = QdrantVectorStore(collection_name="gear", client=QdrantClient(location=":memory:"))
    # LlamaIndex prepends metadata to the embedded text unless told not to; the name is a label.
    documents = [
        Document(text=text, metadata={"name": name}, excluded_embed_metadata_keys=["name"])
        for name, text in DOCS.items()
    ]
    storage = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(documents, storage_context=storage, embed_model=embed_model)


def scores_by_name(results) -> dict[str, float]:
    return {item.node.metadata["name"]: item.score for item in results}


@pytest.mark.parametrize("store_kind", ["faiss", "qdrant"])
def test_real_model_retrieval_follows_the_instruction(default_embed_model, store_kind):
    retriever = InstEmbRetriever.from_vector_store_index(
        build_index(default_embed_model, store_kind), similarity_top_k=len(DOCS)
    )
    encoder = default_embed_model.encoder
    document_vectors = encoder.encode_documents(list(DOCS.values()))
    by_instruction = {}
    for instruction in (WEIGHT, DURABILITY):
        got = scores_by_name(retriever.retrieve(QUERY, instruction=instruction))
        # The store's scores are exactly the encoder's query-under-instruction similarities.
        expected = document_vectors @ encoder.encode_queries([QUERY], instruction)[0]
        np.testing.assert_allclose([got[name] for name in DOCS], expected, atol=1e-4)
        by_instruction[instruction] = got
    # Asking about weight favours the light tent over the storm-proof one more than asking
    # about durability does.
    weight, durability = by_instruction[WEIGHT], by_instruction[DURABILITY]
    assert weight["light-tent"] - weight["strong-tent"] > durability["light-tent"] - durability["strong-tent"]


def test_real_model_async_retrieval(default_embed_model):
    retriever = InstEmbRetriever.from_vector_store_index(build_index(default_embed_model, "faiss"), similarity_top_k=2)

    async def both():
        return await asyncio.gather(
            retriever.aretrieve(QUERY, instruction=WEIGHT), retriever.aretrieve(QUERY, instruction=DURABILITY)
        )

    weight, durability = asyncio.run(both())
    assert [n.node.metadata["name"] for n in weight] == [
        n.node.metadata["name"] for n in retriever.retrieve(QUERY, instruction=WEIGHT)
    ]
    assert len(durability) == 2
    assert scores_by_name(weight) != scores_by_name(durability)
