"""InstEmbEmbedding with the tiny random model: instructions, batching, async, cache."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core.base.embeddings.base import BaseEmbedding

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import (
    InstEmbEmbedding,
    InstructionQueryBundle,
    QueryEmbeddingCache,
    QueryKey,
)


def test_is_a_llamaindex_embedding(tiny_embed_model):
    assert isinstance(tiny_embed_model, BaseEmbedding)
    assert InstEmbEmbedding.class_name() == "InstEmbEmbedding"
    assert tiny_embed_model.dimension == 64
    assert tiny_embed_model.to_payload()["fingerprint"] == tiny_embed_model.encoder.fingerprint


def test_text_embeddings_are_the_encoders_document_embeddings(tiny_embed_model, tiny_docs):
    # 5 texts with embed_batch_size=4 → LlamaIndex calls _get_text_embeddings twice.
    got = np.array(tiny_embed_model.get_text_embedding_batch(tiny_docs))
    expected = tiny_embed_model.encoder.encode_documents(tiny_docs)
    assert got.shape == (5, 64)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(tiny_embed_model.get_text_embedding(tiny_docs[2]), expected[2], atol=1e-5)


def test_text_instruction_reaches_the_document_side(tiny_embed_model, tiny_docs):
    with_instruction = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, text_instruction="what is this")
    got = np.array(with_instruction.get_text_embedding_batch(tiny_docs[:2]))
    np.testing.assert_allclose(got, tiny_embed_model.encoder.encode_documents(tiny_docs[:2], "what is this"), atol=1e-5)
    assert not np.allclose(got, tiny_embed_model.encoder.encode_documents(tiny_docs[:2]), atol=1e-4)


def test_plain_query_path_uses_the_default_instruction(tiny_embed_model):
    encoder = tiny_embed_model.encoder
    query = "which tent is light ?"
    got = tiny_embed_model.get_query_embedding(query)
    np.testing.assert_allclose(got, encoder.encode_queries([query], "focus on weight")[0], atol=1e-5)


def test_each_query_gets_its_own_instruction(tiny_embed_model):
    encoder = tiny_embed_model.encoder
    query = "which tent is light ?"
    weight = tiny_embed_model.get_query_embedding_for(query, "focus on weight")
    durability = tiny_embed_model.get_query_embedding_for(query, "focus on durability")
    bare = tiny_embed_model.get_query_embedding_for(query, "")  # "" = no instruction at all
    np.testing.assert_allclose(durability, encoder.encode_queries([query], "focus on durability")[0], atol=1e-5)
    np.testing.assert_allclose(bare, encoder.encode_queries([query], None)[0], atol=1e-5)
    assert not np.allclose(weight, durability, atol=1e-4)
    assert not np.allclose(weight, bare, atol=1e-4)


def test_batched_queries_match_single_queries(tiny_embed_model):
    queries = ["which tent is light ?", "what stove is durable ?", "which tent is light ?"]
    instructions = ["focus on weight", None, "focus on durability"]
    batch = tiny_embed_model.get_query_embeddings(queries, instructions)
    tiny_embed_model.query_cache.clear()
    singles = [tiny_embed_model.get_query_embedding_for(q, i) for q, i in zip(queries, instructions)]
    np.testing.assert_allclose(batch, singles, atol=1e-5)
    with pytest.raises(InstEmbError, match="3 queries but 2 instructions"):
        tiny_embed_model.get_query_embeddings(queries, instructions[:2])


def test_cache_keys_on_instruction_text_and_fingerprint(tiny_embed_model):
    cache = tiny_embed_model.query_cache
    cache.clear()
    query = "which tent is light ?"
    first = tiny_embed_model.get_query_embedding_for(query, "focus on weight")
    other = tiny_embed_model.get_query_embedding_for(query, "focus on durability")
    assert (cache.hits, cache.misses, len(cache)) == (0, 2, 2)
    again = tiny_embed_model.get_query_embedding_for(query, "focus on weight")
    assert (cache.hits, cache.misses) == (1, 2)
    assert again == first and again != other
    fingerprint = tiny_embed_model.fingerprint
    assert QueryKey(fingerprint, "focus on weight", query) in cache
    assert QueryKey("another-encoder", "focus on weight", query) not in cache


def test_cache_returns_copies_and_evicts_least_recently_used():
    cache = QueryEmbeddingCache(max_entries=2)
    a, b, c = (QueryKey("f", None, text) for text in "abc")
    cache.put(a, [1.0])
    cache.put(b, [2.0])
    cache.get(a)[0] = 99.0  # mutating what we got must not change the cache
    assert cache.get(a) == [1.0]  # a is now the most recent
    cache.put(c, [3.0])
    assert a in cache and c in cache and b not in cache
    with pytest.raises(ValueError):
        QueryEmbeddingCache(max_entries=-1)


def test_cache_can_be_turned_off(tiny_embed_model):
    uncached = InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, query_cache_size=0)
    uncached.get_query_embedding_for("which tent is light ?", "focus on weight")
    assert len(uncached.query_cache) == 0


def test_async_paths_match_sync(tiny_embed_model, tiny_docs):
    query = "what stove is durable ?"

    async def run():
        return (
            await tiny_embed_model.aget_query_embedding(query),
            await tiny_embed_model.aget_query_embedding_for(query, "focus on durability"),
            await tiny_embed_model.aget_text_embedding_batch(tiny_docs),
            await tiny_embed_model.aget_text_embedding(tiny_docs[0]),
            await tiny_embed_model.aquery_bundle(query, "focus on durability"),
        )

    default, instructed, texts, single, bundle = asyncio.run(run())
    encoder = tiny_embed_model.encoder
    np.testing.assert_allclose(default, encoder.encode_queries([query], "focus on weight")[0], atol=1e-5)
    np.testing.assert_allclose(instructed, encoder.encode_queries([query], "focus on durability")[0], atol=1e-5)
    np.testing.assert_allclose(texts, encoder.encode_documents(tiny_docs), atol=1e-5)
    np.testing.assert_allclose(single, texts[0], atol=1e-5)
    assert bundle.embedding == instructed


def test_query_bundle_carries_instruction_and_embedding(tiny_embed_model):
    bundle = tiny_embed_model.query_bundle("which tent is light ?", "focus on durability")
    assert isinstance(bundle, InstructionQueryBundle)
    assert bundle.instruction == "focus on durability"
    assert bundle.embedding == tiny_embed_model.get_query_embedding_for("which tent is light ?", "focus on durability")
    assert tiny_embed_model.query_bundle("x", None).instruction == "focus on weight"
    # "" = no instruction: the bundle records it as "", so embedding it again gives the same vector
    # (None would mean the embedding model's default).
    assert tiny_embed_model.query_bundle("x", "").instruction == ""
