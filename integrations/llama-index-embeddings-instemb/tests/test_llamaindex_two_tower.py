"""InstEmbEmbedding over a two-tower encoder (issue 44): text embeddings come from the document
tower, query embeddings from the query LLM; truncation, the document token limit and the node
parser count the sentence encoder's own tokens against its own max_length; the document cache keys
on the sentence encoder, so another query LLM over it reuses the cached document vectors.

The tiny sentence encoder reads max_length=32 tokens with [CLS] and [SEP], so 30 of text (one
token per word of the tiny vocabulary); the tiny LLM would read 60.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.schema import MetadataMode
from llama_index.core.storage.kvstore import SimpleKVStore

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, TruncationWarning

TOWER_LIMIT = 30  # tokens of text the tiny sentence encoder reads
LLM_LIMIT = 60  # what the tiny LLM would read of a document (test_llamaindex_truncation.py)


def words(count: int, word: str = "tent") -> str:
    return " ".join([word] * count)


@pytest.fixture()
def tower(tiny_st_dir):
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    return SentenceEncoder.load(str(tiny_st_dir))


@pytest.fixture()
def embed_model(tiny_two_tower):
    return InstEmbEmbedding.from_encoder(tiny_two_tower, query_instruction="focus on weight", embed_batch_size=4)


def test_text_embeddings_are_the_sentence_encoders_and_query_embeddings_the_query_towers(
    embed_model, tiny_two_tower, tower, tiny_docs
):
    np.testing.assert_allclose(embed_model.get_text_embedding_batch(tiny_docs), tower.encode(tiny_docs), atol=1e-5)
    np.testing.assert_allclose(embed_model.get_text_embedding(tiny_docs[0]), tower.encode(tiny_docs[:1])[0], atol=1e-5)
    query = "which tent is light ?"
    expected = tiny_two_tower.encode_queries([query], "focus on weight")[0]
    np.testing.assert_allclose(embed_model.get_query_embedding(query), expected, atol=1e-5)
    np.testing.assert_allclose(
        embed_model.get_query_embedding_for(query, "focus on durability"),
        tiny_two_tower.encode_queries([query], "focus on durability")[0],
        atol=1e-5,
    )
    assert not np.allclose(embed_model.get_query_embedding(query), tower.encode([query])[0], atol=1e-3)


def test_a_document_instruction_is_refused(tiny_two_tower):
    with pytest.raises(InstEmbError, match="sentence encoder.*reads no instruction"):
        InstEmbEmbedding.from_encoder(tiny_two_tower, text_instruction="focus on weight")
    assert InstEmbEmbedding.from_encoder(tiny_two_tower, text_instruction="  ").document_token_limit == TOWER_LIMIT


def test_the_document_limit_is_the_towers(embed_model, tower):
    assert tower.max_length == 32 and tower.tokens("") == 2
    assert embed_model.document_token_limit == TOWER_LIMIT  # not the LLM's 60
    assert embed_model.recommended_chunk_size == TOWER_LIMIT


def test_a_document_past_the_towers_limit_is_said_to_be_cut(embed_model, tower):
    # 40 words: the LLM would read them all, the sentence encoder reads 30.
    texts = ["this tent is light .", words(38) + " light", words(38) + " heavy durable"]
    with pytest.warns(TruncationWarning) as caught:
        vectors = embed_model.get_text_embedding_batch(texts)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert f"at most {TOWER_LIMIT} tokens of a document" in message
    assert f"what embeds documents: {tower.reference}, max_length=32" in message
    assert "2 of this call's 3 documents were" in message and "has 40 tokens: its last 10" in message
    np.testing.assert_allclose(vectors[1], vectors[2], atol=1e-6)  # they differ only past the cut
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        embed_model.get_text_embedding_batch([words(TOWER_LIMIT)])
        embed_model.get_query_embedding(words(40))  # a query goes to the LLM, which reads it whole


def test_the_node_parser_splits_on_the_towers_tokens(embed_model, tower):
    parser = embed_model.node_parser()
    assert parser.chunk_size == TOWER_LIMIT
    long_document = Document(text=" ".join(["the tent is light and the stove is heavy ."] * 20))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        index = VectorStoreIndex.from_documents([long_document], embed_model=embed_model, transformations=[parser])
    nodes = list(index.docstore.docs.values())
    counts = [tower.tokens(node.get_content(MetadataMode.EMBED)) - 2 for node in nodes]
    assert len(nodes) > 200 // TOWER_LIMIT and max(counts) <= TOWER_LIMIT
    with pytest.raises(InstEmbError, match=f"more than the {TOWER_LIMIT} tokens.*max_length=32"):
        embed_model.node_parser(chunk_size=TOWER_LIMIT + 1)


def test_the_document_cache_keys_on_the_tower(embed_model, tiny_two_tower, tiny_encoder_pair, tiny_docs):
    other_query_llm, symmetric = tiny_encoder_pair
    store = SimpleKVStore()
    first = InstEmbEmbedding.from_encoder(tiny_two_tower, embeddings_cache=store)
    assert first.document_fingerprint == tiny_two_tower.tower.fingerprint != tiny_two_tower.fingerprint
    vectors = first.get_text_embedding_batch(tiny_docs)
    assert first.document_cache.misses == len(tiny_docs)

    # Another query LLM into the same document space: every document vector from the cache.
    other = InstEmbEmbedding.from_encoder(other_query_llm, embeddings_cache=store)
    assert other.fingerprint != first.fingerprint and other.document_fingerprint == first.document_fingerprint
    np.testing.assert_allclose(other.get_text_embedding_batch(tiny_docs), vectors, atol=1e-7)
    assert other.document_cache.hits == len(tiny_docs) and other.document_cache.misses == 0

    # The symmetric encoder embeds documents itself: nothing of the tower's is reused.
    plain = InstEmbEmbedding.from_encoder(symmetric, embeddings_cache=store)
    plain.get_text_embedding_batch(tiny_docs)
    assert plain.document_cache.hits == 0 and plain.document_cache.misses == len(tiny_docs)


@pytest.fixture()
def tiny_encoder_pair(tiny_two_tower):
    """(another query LLM over the same sentence encoder, the symmetric encoder under them)."""
    import torch

    from instemb_rag.encoder.modules.projection import Projection

    torch.manual_seed(7)
    head = Projection(tiny_two_tower.hidden_size, tiny_two_tower.tower.dimension)
    return tiny_two_tower.with_projection(head), tiny_two_tower.query_llm.with_projection(None)
