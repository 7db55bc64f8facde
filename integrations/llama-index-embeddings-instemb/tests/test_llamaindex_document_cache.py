"""A document-embedding cache on LlamaIndex's embeddings_cache protocol (a BaseKVStore), keyed on the
encoder that embeds documents, the document instruction and the text: re-ingesting unchanged nodes
embeds nothing, and nothing is shared across encoders or instructions.

"Embeds nothing" is counted at the model: a forward hook on the encoder's transformer.
"""

from __future__ import annotations

import asyncio
import pickle
from contextlib import contextmanager

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.storage.kvstore import SimpleKVStore

from instemb_rag import InstEmbEncoder
from llama_index.embeddings.instemb import InstEmbEmbedding


@contextmanager
def forward_passes(encoder):
    """The batch sizes the encoder's transformer runs (instemb_rag/encoder/modules/forward.py runs
    ``model.base_model``)."""
    seen = []

    def record(module, args, kwargs, output) -> None:
        seen.append(output.last_hidden_state.shape[0])

    handle = encoder.model.base_model.register_forward_hook(record, with_kwargs=True)
    try:
        yield seen
    finally:
        handle.remove()


def vectors_of(index) -> dict[str, list[float]]:
    """Each node's stored vector, by the node's text (split nodes get new ids each ingestion)."""
    return {node.text: index.vector_store.get(node_id) for node_id, node in index.docstore.docs.items()}


def documents(texts) -> list[Document]:
    return [Document(text=text, id_=f"doc{i}") for i, text in enumerate(texts)]


def test_reingesting_unchanged_nodes_embeds_nothing(tiny_embed_model, tiny_docs):
    store = SimpleKVStore()
    cached = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, embeddings_cache=store, embed_batch_size=4)
    with forward_passes(cached.encoder) as passes:
        first = VectorStoreIndex.from_documents(documents(tiny_docs), embed_model=cached)
    assert sum(passes) == 5  # the hook sees the model run
    assert (cached.document_cache.hits, cached.document_cache.misses) == (0, 5)
    with forward_passes(cached.encoder) as passes:
        again = VectorStoreIndex.from_documents(documents(tiny_docs), embed_model=cached)
    assert passes == [] and cached.document_cache.hits == 5
    assert vectors_of(again) == vectors_of(first)
    np.testing.assert_allclose(
        [vectors_of(first)[text] for text in tiny_docs], tiny_embed_model.encoder.encode_documents(tiny_docs), atol=1e-5
    )
    # One changed document: only it is embedded.
    changed = [*tiny_docs[:4], "the gas fuel stove is bad for a cold night ."]
    with forward_passes(cached.encoder) as passes:
        cached.get_text_embedding_batch(changed)
    assert passes == [1] and (cached.document_cache.hits, cached.document_cache.misses) == (9, 6)

    async def async_ingestion():
        return await cached.aget_text_embedding_batch(tiny_docs)

    with forward_passes(cached.encoder) as passes:
        assert asyncio.run(async_ingestion()) == cached.get_text_embedding_batch(tiny_docs)
    assert passes == []


def test_entries_are_never_shared_across_encoders_or_document_instructions(tiny_embed_model, tiny_model_dir, tiny_docs):
    store = SimpleKVStore()
    plain = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, embeddings_cache=store)
    plain.get_text_embedding_batch(tiny_docs)
    instructed = InstEmbEmbedding.from_encoder(
        tiny_embed_model.encoder, embeddings_cache=store, text_instruction="what is this"
    )
    other_encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu", lookahead_length=2, max_length=64)
    other = InstEmbEmbedding.from_encoder(other_encoder, embeddings_cache=store)
    for embed_model, encoder, instruction in (
        (instructed, tiny_embed_model.encoder, "what is this"),
        (other, other_encoder, None),
    ):
        got = embed_model.get_text_embedding_batch(tiny_docs)
        assert embed_model.document_cache.hits == 0  # the shared store holds the others' entries only
        np.testing.assert_allclose(got, encoder.encode_documents(tiny_docs, instruction), atol=1e-5)
    assert len(store.get_all(collection="instemb_document_embeddings")) == 15
    assert store.get_all() == {}  # LlamaIndex's text-keyed collection is not used
    assert plain.document_fingerprint == tiny_embed_model.encoder.fingerprint != other.document_fingerprint


def test_a_persisted_cache_serves_a_new_process(tiny_embed_model, tiny_model_dir, tiny_docs, tmp_path):
    store = SimpleKVStore()
    InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, embeddings_cache=store).get_text_embedding_batch(tiny_docs)
    store.persist(str(tmp_path / "document-embeddings.json"))

    reloaded = SimpleKVStore.from_persist_path(str(tmp_path / "document-embeddings.json"))
    fresh = InstEmbEmbedding.from_encoder(
        tiny_embed_model.encoder, model_path=tiny_model_dir, embeddings_cache=reloaded
    )
    with forward_passes(fresh.encoder) as passes:
        fresh.get_text_embedding_batch(tiny_docs)
    assert passes == [] and fresh.document_cache.hits == 5
    # A view shares the cache; saving the embedding leaves the live store out (pass it again).
    assert fresh.with_instruction("focus on weight").document_cache is fresh.document_cache
    assert "embeddings_cache" not in fresh.to_dict()
    assert pickle.loads(pickle.dumps(fresh)).document_cache is None


def test_a_store_that_is_no_kv_store_is_refused(tiny_embed_model):
    with pytest.raises(TypeError, match="embeddings_cache must be of type BaseKVStore"):
        InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, embeddings_cache={})
