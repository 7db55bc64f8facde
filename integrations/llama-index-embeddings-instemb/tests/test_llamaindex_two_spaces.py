"""InstEmbEmbedding over a two-space encoder (issue 50): text embeddings are the encoder's
documents ``[A; B] / sqrt 2``; query embeddings ``[w a; (1 - w) b]`` normalised under ``llm_weight``
(a field, a view, per call, per retrieval; cached per weight); the node parser, the document
limit, the document-instruction refusal and the document cache all read ``encoder.document_side``;
a server's model card gives the document fingerprint and the knob (RemoteEncoder).

The tiny LLM reads max_length=64 (60 tokens of a document), the tiny sentence encoder 32 (30): the
document side's limit is the sentence encoder's.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.core.storage.kvstore import SimpleKVStore

from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever, TruncationWarning

pytest.importorskip("sentence_transformers")

QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"
LIMIT = 30  # tokens of a document the tiny sentence encoder reads (the LLM would read 60)


@pytest.fixture(scope="module")
def two_spaces(tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_mix

    return untrained_mix(
        str(tiny_model_dir), str(tiny_st_dir), llm_weight=0.5, device="cpu", lookahead_length=4, max_length=64
    )


@pytest.fixture()
def embed_model(two_spaces):
    return InstEmbEmbedding.from_encoder(two_spaces, query_instruction=INSTRUCTION, embed_batch_size=4)


def weighted(encoder, queries, instructions, weight: float) -> np.ndarray:
    """[w a; (1 - w) b] normalised, from the queries' two halves."""
    llm_vectors, sentence_encoder_vectors, _ = encoder.query_by_space(queries, instructions)
    mixed = np.concatenate([weight * llm_vectors, (1 - weight) * sentence_encoder_vectors], axis=1)
    return mixed / np.linalg.norm(mixed, axis=1, keepdims=True)


def test_text_embeddings_are_the_documents_and_queries_take_the_weight(embed_model, two_spaces, tiny_docs):
    np.testing.assert_allclose(
        embed_model.get_text_embedding_batch(tiny_docs), two_spaces.encode_documents(tiny_docs), atol=1e-5
    )
    # The model's own weight (0.5), the field's, a view's and a call's
    np.testing.assert_allclose(
        embed_model.get_query_embedding(QUERY), weighted(two_spaces, [QUERY], [INSTRUCTION], 0.5)[0], atol=1e-5
    )
    fixed = InstEmbEmbedding.from_encoder(two_spaces, query_instruction=INSTRUCTION, llm_weight=0.2)
    assert fixed.llm_weight == 0.2 and fixed.to_dict()["llm_weight"] == 0.2
    np.testing.assert_allclose(
        fixed.get_query_embedding(QUERY), weighted(two_spaces, [QUERY], [INSTRUCTION], 0.2)[0], atol=1e-5
    )
    np.testing.assert_allclose(
        embed_model.with_llm_weight(0.9).get_query_embedding(QUERY),
        weighted(two_spaces, [QUERY], [INSTRUCTION], 0.9)[0],
        atol=1e-5,
    )
    # (None: the embed model's query_instruction; "": none)
    mixed = embed_model.get_query_embeddings([QUERY] * 3, ["focus on durability", None, ""], llm_weight=1.0)
    expected = weighted(two_spaces, [QUERY] * 3, ["focus on durability", INSTRUCTION, None], 1.0)
    np.testing.assert_allclose(mixed, expected, atol=1e-5)
    # One query under two weights: two cache entries, never one vector for both
    first = embed_model.get_query_embedding_for(QUERY, "focus on durability", llm_weight=0.3)
    second = embed_model.get_query_embedding_for(QUERY, "focus on durability", llm_weight=0.7)
    assert not np.allclose(first, second, atol=1e-3)
    np.testing.assert_allclose(
        embed_model.get_query_embedding_for(QUERY, "focus on durability", llm_weight=0.3), first, atol=0
    )


def test_a_weight_is_checked_and_a_model_of_one_space_refuses_one(two_spaces, tiny_embed_model):
    for wrong in (1.5, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(InstEmbError, match="between 0 and 1"):
            InstEmbEmbedding.from_encoder(two_spaces, llm_weight=wrong)
    with pytest.raises(InstEmbError, match="not a two-space model: it ranks by one space"):
        InstEmbEmbedding.from_encoder(tiny_embed_model.encoder, llm_weight=0.5)
    with pytest.raises(InstEmbError, match="one space"):
        tiny_embed_model.get_query_embeddings([QUERY], None, llm_weight=0.5)
    with pytest.raises(InstEmbError, match="one space"):
        tiny_embed_model.with_llm_weight(0.5)


def test_the_document_side_sizes_chunks_and_refuses_a_document_instruction(embed_model, two_spaces):
    side = two_spaces.document_side
    assert side.token_limit == LIMIT and side.max_length == 32
    assert embed_model.document_token_limit == LIMIT and embed_model.recommended_chunk_size == LIMIT
    parser = embed_model.node_parser()
    assert parser.chunk_size == LIMIT
    long_document = Document(text=" ".join(["the tent is light and the stove is heavy ."] * 20))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        index = VectorStoreIndex.from_documents([long_document], embed_model=embed_model, transformations=[parser])
    counts = side.text_tokens([node.get_content(MetadataMode.EMBED) for node in index.docstore.docs.values()])
    assert len(counts) > 200 // LIMIT and max(counts) <= LIMIT
    with pytest.raises(InstEmbError, match=f"more than the {LIMIT} tokens.*max_length=32"):
        embed_model.node_parser(chunk_size=LIMIT + 1)
    with pytest.warns(TruncationWarning, match=f"at most {LIMIT} tokens of a document"):
        embed_model.get_text_embedding_batch([" ".join(["tent"] * 40)])  # the LLM would read 40 whole
    with pytest.raises(InstEmbError, match="sentence encoder.*reads no instruction"):
        InstEmbEmbedding.from_encoder(two_spaces, text_instruction="focus on weight")


def test_the_document_cache_keys_on_the_document_side(two_spaces, tiny_docs):
    store = SimpleKVStore()
    first = InstEmbEmbedding.from_encoder(two_spaces, embeddings_cache=store)
    assert first.document_fingerprint == two_spaces.document_side.fingerprint != two_spaces.fingerprint
    vectors = first.get_text_embedding_batch(tiny_docs)
    # Another weight (a query-side setting) over the same documents: every vector from the cache.
    other = InstEmbEmbedding.from_encoder(two_spaces.with_llm_weight(0.8), embeddings_cache=store, llm_weight=0.1)
    assert other.document_fingerprint == first.document_fingerprint
    np.testing.assert_allclose(other.get_text_embedding_batch(tiny_docs), vectors, atol=1e-7)
    assert other.document_cache.hits == len(tiny_docs) and other.document_cache.misses == 0


def test_the_retriever_takes_a_weight_per_call(embed_model, two_spaces, tiny_docs, tiny_embed_model):
    nodes = [TextNode(text=text, id_=f"doc{number}") for number, text in enumerate(tiny_docs)]
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    retriever = InstEmbRetriever.from_vector_store_index(index, similarity_top_k=len(tiny_docs))
    documents = two_spaces.encode_documents(tiny_docs)
    rankings = {}
    for weight in (0.05, 0.95):
        hits = retriever.retrieve(QUERY, instruction="focus on durability", llm_weight=weight)
        query = weighted(two_spaces, [QUERY], ["focus on durability"], weight)[0]
        cosines = documents @ query / np.linalg.norm(query)  # the simple store's cosine
        for hit in hits:
            assert hit.score == pytest.approx(float(cosines[int(hit.node.node_id[3:])]), abs=1e-4)
        rankings[weight] = [hit.node.node_id for hit in hits]
    # Without a weight: the embed model's own (the model's 0.5)
    hits = retriever.retrieve(QUERY, instruction="focus on durability")
    query = weighted(two_spaces, [QUERY], ["focus on durability"], 0.5)[0]
    assert hits[0].score == pytest.approx(float(max(documents @ query / np.linalg.norm(query))), abs=1e-4)
    with pytest.raises(InstEmbError, match="between 0 and 1"):
        retriever.retrieve(QUERY, llm_weight=2.0)
    plain = VectorStoreIndex(nodes, embed_model=tiny_embed_model)
    with pytest.raises(InstEmbError, match="one space"):
        InstEmbRetriever.from_vector_store_index(plain).retrieve(QUERY, llm_weight=0.5)


def test_a_server_of_two_spaces_reports_its_document_side_and_takes_the_weight(two_spaces, monkeypatch):
    """RemoteEncoder against the server in-process (its HTTP client is the app's TestClient)."""
    pytest.importorskip("fastapi")
    import httpx
    from fastapi.testclient import TestClient

    from instemb_rag.serve import ServeOptions, ServerState, create_app
    from llama_index.embeddings.instemb import remote

    state = ServerState(two_spaces, ServeOptions())
    app = create_app(state)

    def client(base_url, headers, timeout):
        return TestClient(app, base_url=base_url, headers=headers)

    monkeypatch.setattr(remote, "httpx", types.SimpleNamespace(Client=client, HTTPError=httpx.HTTPError))
    state.batcher.start()
    try:
        with InstEmbEmbedding(base_url="http://test", llm_weight=0.3, query_instruction=INSTRUCTION) as embedding:
            encoder = embedding.encoder
            assert encoder.takes_llm_weight and encoder.document_token_limit == LIMIT
            assert embedding.document_fingerprint == encoder.document_fingerprint == two_spaces.document_fingerprint
            np.testing.assert_allclose(
                embedding.get_query_embedding(QUERY), weighted(two_spaces, [QUERY], [INSTRUCTION], 0.3)[0], atol=1e-5
            )
            np.testing.assert_allclose(
                embedding.get_query_embedding_for(QUERY, "", llm_weight=0.9),
                weighted(two_spaces, [QUERY], [None], 0.9)[0],
                atol=1e-5,
            )
            with pytest.raises(InstEmbError, match="between 0 and 1"):
                encoder.encode_queries([QUERY], None, llm_weight=3)
    finally:
        state.close()
