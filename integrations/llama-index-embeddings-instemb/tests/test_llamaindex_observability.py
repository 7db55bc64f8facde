"""Every embedding call reaches LlamaIndex's dispatcher and callback manager, instruction included."""

from __future__ import annotations

import asyncio

import faiss
import pytest
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.embedding import EmbeddingEndEvent, EmbeddingStartEvent
from llama_index.core.schema import TextNode
from llama_index.vector_stores.faiss import FaissVectorStore

from llama_index.embeddings.instemb import InstEmbRetriever, InstructionQueryBundle

QUERY = "which tent is good for a camp trip ?"


class Recorder(BaseEventHandler):
    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    def handle(self, event, **kwargs) -> None:
        if isinstance(event, (EmbeddingStartEvent, EmbeddingEndEvent)):
            self.events.append(event)


@pytest.fixture()
def recorder():
    handler = Recorder(events=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


def started(recorder) -> list[tuple[str, list]]:
    return [
        (event.model_dict["input_type"], event.model_dict["instructions"])
        for event in recorder.events
        if isinstance(event, EmbeddingStartEvent)
    ]


def test_every_path_reports_its_instruction(recorder, tiny_embed_model, tiny_docs):
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(tiny_embed_model.dimension))
    nodes = [TextNode(text=text) for text in tiny_docs[:2]]
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=tiny_embed_model
    )
    assert started(recorder) == [("document", [None, None])]
    recorder.events.clear()

    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=2)
    retriever.retrieve(QUERY, instruction="focus on durability")
    tiny_embed_model.query_bundle(QUERY, "focus on price")
    tiny_embed_model.get_query_embedding(QUERY)  # LlamaIndex's own path: the default instruction
    index.as_retriever().retrieve(InstructionQueryBundle(query_str=QUERY, instruction=""))
    asyncio.run(retriever.aretrieve(QUERY, instruction="focus on size"))
    assert started(recorder) == [
        ("query", ["focus on durability"]),
        ("query", ["focus on price"]),
        ("query", ["focus on weight"]),
        ("query", [None]),
        ("query", ["focus on size"]),
    ]
    ends = [event for event in recorder.events if isinstance(event, EmbeddingEndEvent)]
    assert [end.chunks for end in ends] == [[QUERY]] * 5 and all(len(end.embeddings) == 1 for end in ends)
    assert all(event.model_dict["fingerprint"] == tiny_embed_model.fingerprint for event in recorder.events[::2])


def test_callback_manager_sees_instruction_calls(tiny_embed_model, tiny_docs):
    index = VectorStoreIndex([TextNode(text=text) for text in tiny_docs[:3]], embed_model=tiny_embed_model)
    debug = LlamaDebugHandler()
    tiny_embed_model.callback_manager = CallbackManager([debug])  # the index set Settings' own
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=2)
    retriever.retrieve(QUERY, instruction="focus on durability")
    tiny_embed_model.get_query_embeddings([QUERY, QUERY], ["focus on weight", ""])
    pairs = debug.get_event_pairs(CBEventType.EMBEDDING)
    assert [start.payload["instructions"] for start, _ in pairs] == [["focus on durability"], ["focus on weight", None]]
    assert [len(end.payload["embeddings"]) for _, end in pairs] == [1, 2]
