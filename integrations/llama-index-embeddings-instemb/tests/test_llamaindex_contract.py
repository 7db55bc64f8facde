"""What LlamaIndex's own test suite asks of an embedding model, asked of InstEmbEmbedding.

llama-index-core tests its embedding, vector-index, retriever, fusion and ingestion code against
``MockEmbedding`` (tests/embeddings/test_base.py and test_with_cache.py,
tests/indices/vector_store/test_simple.py and test_retrievers.py,
tests/retrievers/test_fusion_retriever.py, tests/ingestion/). These tests check the same
behaviours with InstEmbEmbedding on the tiny model in its place, the expected vectors and rankings
computed with the encoder, so a LlamaIndex release that changes one of them fails here.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.base.embeddings.base import SimilarityMode, mean_agg
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.storage.kvstore import SimpleKVStore
from llama_index.core.vector_stores import SimpleVectorStore

from llama_index.embeddings.instemb import InstEmbEmbedding, InstructionFusionRetriever

QUERY = "which tent is good for a camp trip ?"


@pytest.fixture()
def embed_model(tiny_embed_model, tiny_model_dir):
    """The fixture's encoder, with model_path set so that pickling can load it again."""
    return InstEmbEmbedding.from_encoder(
        tiny_embed_model.encoder, model_path=tiny_model_dir, query_instruction="focus on weight", embed_batch_size=4
    )


def stored(index) -> dict[str, tuple[list[float], str | None]]:
    """Each node's (stored vector, ref_doc_id), by the node's text."""
    result = {}
    for text_id, node_id in index.index_struct.nodes_dict.items():
        node = index.docstore.get_node(node_id)
        result[node.get_content()] = (index.vector_store.get(text_id), node.ref_doc_id)
    return result


def assert_vectors_are_the_encoders(index, embed_model, texts) -> None:
    by_text = stored(index)
    assert sorted(by_text) == sorted(texts)
    expected = embed_model.encoder.encode_documents(list(texts))
    np.testing.assert_allclose([by_text[text][0] for text in texts], expected, atol=1e-5)


# ---------------------------------------------------------------- embeddings (tests/embeddings/)
def test_a_batch_gives_one_vector_per_text_in_order(embed_model, tiny_docs):
    texts = [tiny_docs[0]] * 8 + [tiny_docs[1]] * 8 + [tiny_docs[2]] * 4 + [tiny_docs[3]] * 4  # 6 batches of 4
    vectors = embed_model.get_text_embedding_batch(texts)
    singles = {text: embed_model.get_text_embedding(text) for text in set(texts)}
    assert len(vectors) == len(texts)
    for text, vector in zip(texts, vectors):
        np.testing.assert_allclose(vector, singles[text], atol=1e-5)


def test_similarity_and_aggregation_follow_llamaindex(embed_model, tiny_docs):
    query = embed_model.get_query_embedding(QUERY)
    documents = embed_model.get_text_embedding_batch(tiny_docs[:2])
    # Unit vectors: LlamaIndex's cosine similarity is the dot product the stores rank by.
    for document in documents:
        assert embed_model.similarity(query, document) == pytest.approx(float(np.dot(query, document)), abs=1e-5)
    closer = max(documents, key=lambda document: np.dot(query, document))
    farther = min(documents, key=lambda document: np.dot(query, document))
    assert embed_model.similarity(query, closer, mode=SimilarityMode.EUCLIDEAN) > embed_model.similarity(
        query, farther, mode=SimilarityMode.EUCLIDEAN
    )
    strings = [QUERY, "a light tent ."]
    np.testing.assert_allclose(
        embed_model.get_agg_embedding_from_queries(strings),
        mean_agg([embed_model.get_query_embedding(string) for string in strings]),
        atol=1e-6,
    )


class EndEvents(BaseEventHandler):
    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "EndEvents"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, EmbeddingEndEvent):
            self.events.append(event)


def test_one_end_event_per_embedding_call(embed_model, tiny_docs):
    handler = EndEvents(events=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        embed_model.get_text_embedding(tiny_docs[0])
        embed_model.get_query_embedding(QUERY)
    finally:
        root.event_handlers.remove(handler)
    assert [event.chunks for event in handler.events] == [[tiny_docs[0]], [QUERY]]
    assert all(len(event.embeddings) == 1 for event in handler.events)


def test_embeddings_cache_sync_and_async(embed_model, tiny_docs):
    cached = InstEmbEmbedding.from_encoder(embed_model.encoder, embeddings_cache=SimpleKVStore())
    first = cached.get_text_embedding(tiny_docs[0])
    np.testing.assert_allclose(first, embed_model.get_text_embedding(tiny_docs[0]), atol=1e-6)
    assert cached.get_text_embedding_batch([tiny_docs[0]]) == [first]

    async def both():
        return await cached.aget_text_embedding(tiny_docs[1]), await cached.aget_text_embedding_batch([tiny_docs[1]])

    single, batch = asyncio.run(both())
    assert batch == [single]
    assert len(cached.embeddings_cache.get_all(collection="instemb_document_embeddings")) == 2
    assert (cached.document_cache.hits, cached.document_cache.misses) == (2, 2)


# ---------------------------------------------------------------- vector index (tests/indices/vector_store/)
def test_build_insert_delete_and_reinsert(embed_model, tiny_docs):
    documents = [Document(text=text, id_=f"ref{i}") for i, text in enumerate(tiny_docs[:4])]
    index = VectorStoreIndex.from_documents(documents, embed_model=embed_model)
    assert len(index.index_struct.nodes_dict) == 4
    assert_vectors_are_the_encoders(index, embed_model, tiny_docs[:4])
    assert list(index.ref_doc_info) == [document.node_id for document in documents]

    index.insert(Document(text=tiny_docs[4], id_="ref4"))
    index.insert(Document(text=""))  # an empty document is handled, as LlamaIndex's test asks
    by_text = stored(index)
    assert sorted(by_text) == sorted([*tiny_docs, ""]) and len(by_text[""][0]) == embed_model.dimension
    np.testing.assert_allclose(
        [by_text[text][0] for text in tiny_docs], embed_model.encoder.encode_documents(tiny_docs), atol=1e-5
    )

    index.delete_ref_doc("ref0", delete_from_docstore=True)
    assert tiny_docs[0] not in stored(index) and index.docstore.get_ref_doc_info("ref0") is None
    index.insert(Document(text="a light tent for a camp trip .", id_="ref0"))
    assert stored(index)["a light tent for a camp trip ."][1] == "ref0"


def test_async_build_and_refresh(embed_model, tiny_docs):
    documents = [Document(text=text, id_=f"ref{i}") for i, text in enumerate(tiny_docs)]
    index = VectorStoreIndex.from_documents(documents, embed_model=embed_model, use_async=True)
    assert_vectors_are_the_encoders(index, embed_model, tiny_docs)
    changed = Document(text="the gas fuel stove is bad in rain .", id_="ref4")
    assert index.refresh_ref_docs([*documents[:4], changed]) == [False] * 4 + [True]
    assert_vectors_are_the_encoders(index, embed_model, [*tiny_docs[:4], changed.text])


def test_persist_load_and_pickle(embed_model, tiny_docs, tmp_path):
    storage_context = StorageContext.from_defaults()
    index = VectorStoreIndex.from_documents(
        [Document(text=text) for text in tiny_docs], embed_model=embed_model, storage_context=storage_context
    )
    storage_context.persist(str(tmp_path / "storage"))
    loaded = load_index_from_storage(
        StorageContext.from_defaults(persist_dir=str(tmp_path / "storage")), embed_model=embed_model
    )
    assert loaded.index_struct == index.index_struct
    assert stored(loaded) == stored(index)
    unpickled = pickle.loads(pickle.dumps(index))
    assert stored(unpickled) == stored(index)
    assert unpickled._embed_model.fingerprint == embed_model.fingerprint


def test_retrieval_through_the_stock_retriever(embed_model, tiny_docs):
    source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="the-ref-doc")}
    nodes = [TextNode(text=text, id_=f"node{i}", relationships=source) for i, text in enumerate(tiny_docs)]
    index = VectorStoreIndex(nodes, embed_model=embed_model, storage_context=StorageContext.from_defaults())
    assert isinstance(index.vector_store, SimpleVectorStore)
    scores = (
        embed_model.encoder.encode_documents(tiny_docs)
        @ embed_model.encoder.encode_queries([QUERY], embed_model.query_instruction)[0]
    )
    top = index.as_retriever(similarity_top_k=1).retrieve(QueryBundle(QUERY))
    assert [hit.node.node_id for hit in top] == [f"node{int(np.argmax(scores))}"]
    assert top[0].node.ref_doc_id == "the-ref-doc"
    assert top[0].score == pytest.approx(float(scores.max()), abs=1e-4)


# ---------------------------------------------------------------- fusion (tests/retrievers/)
class OneResult(BaseRetriever):
    def __init__(self, text: str):
        self.text = text
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=self.text, id_=self.text), score=1.0)]


def test_fusion_aretrieve_asks_the_llm_asynchronously(embed_model, tiny_docs):
    asked = []

    class AsyncOnlyLLM(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            raise AssertionError("aretrieve must not call the sync complete()")

        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            asked.append(prompt)
            return CompletionResponse(text="a light tent .\na durable stove .")

    index = VectorStoreIndex([TextNode(text=text) for text in tiny_docs], embed_model=embed_model)
    fusion = InstructionFusionRetriever([index.as_retriever(similarity_top_k=2)], llm=AsyncOnlyLLM(), num_queries=3)
    assert asyncio.run(fusion.aretrieve(QUERY, instruction="focus on durability"))
    assert len(asked) == 1


def test_fusion_weights_retrievers(embed_model):
    # Relative-score fusion weighs retrievers in every LlamaIndex release this supports (reciprocal
    # rank fusion only in later ones).
    fusion = InstructionFusionRetriever(
        [OneResult("lighter weight"), OneResult("heavier weight")],
        llm=MockLLM(),
        mode=FUSION_MODES.RELATIVE_SCORE,
        retriever_weights=[0.1, 0.9],
        num_queries=1,
        use_async=False,
    )
    results = fusion.retrieve(QUERY, instruction="focus on weight")
    assert [hit.node.get_content() for hit in results] == ["heavier weight", "lighter weight"]
    assert results[0].score > results[1].score


# ---------------------------------------------------------------- ingestion (tests/ingestion/)
def test_ingestion_pipeline_deduplicates_and_caches(embed_model, tiny_docs):
    documents = [Document(text=text, id_=f"ref{i}") for i, text in enumerate(tiny_docs)]
    cache = IngestionCache()
    pipeline = IngestionPipeline(
        transformations=[embed_model.node_parser(), embed_model],
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
        cache=cache,
    )
    nodes = pipeline.run(documents=documents)
    np.testing.assert_allclose(
        [node.embedding for node in nodes], embed_model.encoder.encode_documents(tiny_docs), atol=1e-5
    )
    assert pipeline.run(documents=documents) == []  # the docstore knows them all
    again = IngestionPipeline(transformations=[embed_model.node_parser(), embed_model], cache=cache)
    cached_nodes = asyncio.run(again.arun(documents=documents))  # the transformation cache answers
    assert [node.embedding for node in cached_nodes] == [node.embedding for node in nodes]
