"""The server with a two-space model (issue 50), in-process: documents are the encoder's
``[A; B] / sqrt 2``; every check reads the encoder's document side (a document instruction is a 400
before the request joins a batch; the model card gives the sentence encoder's window, not the
LLM's); usage counts every part a text ran through; ``llm_weight`` is a knob per request (the
query becomes ``[w a; (1 - w) b]`` normalised), requests under different weights never share an
encoder call, and a model of one space refuses it.

The tiny LLM reads max_length=64 (60 tokens of a document), the tiny sentence encoder 32 (30)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("sentence_transformers")

from fastapi.testclient import TestClient  # noqa: E402

from instemb_rag.serve import ServeOptions, ServerState, create_app  # noqa: E402
from instemb_rag.serve.batching import BatchingOptions  # noqa: E402

DOCUMENTS = ["the tent is durable nylon . good in rain and wind .", "the stove is light . fuel gas burner ."]
QUERIES = ["which tent is light ?", "the stove burner is good for a cold night"]
INSTRUCTIONS = ["focus on weight", None]


@pytest.fixture(scope="module")
def two_spaces(tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_two_spaces

    return untrained_two_spaces(
        str(tiny_model_dir), str(tiny_st_dir), llm_weight=0.5, device="cpu", lookahead_length=4, max_length=64
    )


def weighted(encoder, queries, instructions, weight: float) -> np.ndarray:
    """[w a; (1 - w) b] normalised, from the query's two halves."""
    llm_vectors, sentence_encoder_vectors, _ = encoder.query_by_space(queries, instructions)
    mixed = np.concatenate([weight * llm_vectors, (1 - weight) * sentence_encoder_vectors], axis=1)
    return mixed / np.linalg.norm(mixed, axis=1, keepdims=True)


def vectors_of(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array([item["embedding"] for item in response.json()["data"]])


def test_documents_queries_usage_and_the_model_card(two_spaces):
    side = two_spaces.document_side
    with TestClient(create_app(ServerState(two_spaces, ServeOptions()))) as client:
        response = client.post("/v1/embeddings", json={"input": DOCUMENTS, "input_type": "document"})
        np.testing.assert_allclose(vectors_of(response), two_spaces.encode_documents(DOCUMENTS), atol=1e-5)
        # usage: the LLM's tokens and the sentence encoder's, for each document
        tokens = sum(side.tokens(text) for text in DOCUMENTS)
        assert tokens == sum(
            len(two_spaces.documents_llm.build_ids(t, None)) + two_spaces.sentence_encoder.tokens(t) for t in DOCUMENTS
        )
        assert response.json()["usage"]["prompt_tokens"] == tokens

        response = client.post("/v1/embeddings", json={"input": QUERIES, "instruction": INSTRUCTIONS})
        np.testing.assert_allclose(vectors_of(response), two_spaces.encode_queries(QUERIES, INSTRUCTIONS), atol=1e-5)
        # usage: the LLM's prefill and the sentence encoder's pass (the anchor) of each query
        expected = sum(two_spaces.query_tokens(q, i) for q, i in zip(QUERIES, INSTRUCTIONS))
        assert expected > sum(len(two_spaces.build_ids(q, i)) for q, i in zip(QUERIES, INSTRUCTIONS))
        assert response.json()["usage"]["prompt_tokens"] == expected

        card = client.get("/v1/models").json()["data"][0]
        assert card["max_length"] == 32 and card["document_token_limit"] == 30  # the sentence encoder's, not 64 / 60
        assert card["query_max_length"] == 64 and card["dimension"] == two_spaces.dimension
        assert card["fingerprint"] == two_spaces.fingerprint
        assert card["document_fingerprint"] == two_spaces.document_fingerprint != two_spaces.fingerprint
        assert card["document_instruction"] is False and card["llm_weight"] == {
            "default": 0.5,
            "minimum": 0.0,
            "maximum": 1.0,
        }


@pytest.mark.parametrize("instruction", ["focus on weight", [None, "focus on weight"]])
def test_a_document_instruction_is_refused_before_it_joins_a_batch(two_spaces, instruction):
    with TestClient(create_app(ServerState(two_spaces, ServeOptions()))) as client:
        response = client.post(
            "/v1/embeddings", json={"input": DOCUMENTS, "input_type": "document", "instruction": instruction}
        )
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "sentence encoder" in error["message"] and "query" in error["message"]
        assert error["param"] == "instruction" and error["code"] == "document_instruction_unsupported"
        assert client.app.state.instemb.batcher.forward_batches == 0  # refused before the batcher


def test_llm_weight_weighs_the_two_halves(two_spaces):
    with TestClient(create_app(ServerState(two_spaces, ServeOptions()))) as client:
        for weight in (0.2, 1.0, 0.0):
            response = client.post(
                "/v1/embeddings", json={"input": QUERIES, "instruction": INSTRUCTIONS, "llm_weight": weight}
            )
            np.testing.assert_allclose(
                vectors_of(response), weighted(two_spaces, QUERIES, INSTRUCTIONS, weight), atol=1e-5
            )
        default = vectors_of(client.post("/v1/embeddings", json={"input": QUERIES, "instruction": INSTRUCTIONS}))
        np.testing.assert_allclose(default, weighted(two_spaces, QUERIES, INSTRUCTIONS, 0.5), atol=1e-5)

        for body, words in (
            ({"input": QUERIES, "llm_weight": 1.5}, "between 0 and 1"),
            ({"input": QUERIES, "llm_weight": -0.1}, "between 0 and 1"),
            ({"input": DOCUMENTS, "input_type": "document", "llm_weight": 0.3}, "documents"),
        ):
            response = client.post("/v1/embeddings", json=body)
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert words in error["message"] and error["param"] == "llm_weight"


def test_requests_under_different_weights_get_their_own_weights(two_spaces):
    """Three query requests in one batching window (the batch is full at 2 inputs): the two under
    0.2 share one encoder call, the one under 0.9 gets a call of its own, each its own weight."""
    import httpx

    state = ServerState(two_spaces, ServeOptions(batching=BatchingOptions(max_batch_size=2, max_wait_ms=1_500)))
    asked = [(QUERIES[0], 0.2), (QUERIES[1], 0.9), (QUERIES[1], 0.2)]

    async def together():
        transport = httpx.ASGITransport(app=create_app(state))
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as client:
            requests = [
                client.post("/v1/embeddings", json={"input": [query], "llm_weight": weight}) for query, weight in asked
            ]
            return await asyncio.gather(*requests)

    state.batcher.start()
    try:
        responses = asyncio.run(together())
    finally:
        state.close()
    for response, (query, weight) in zip(responses, asked):
        np.testing.assert_allclose(vectors_of(response)[0], weighted(two_spaces, [query], [None], weight)[0], atol=1e-5)
    assert state.batcher.forward_batches == 2 and state.batcher.largest_batch == 2


def test_search_takes_the_weight(two_spaces):
    """/v1/search embeds the query under the request's llm_weight and searches with that vector."""

    class RecordingIndex:
        """What the query service reads of an index (service/answer.py SearchableIndex), recording
        the vector the store is asked for."""

        encoder, query_knob, placement_note, fallback_reason = two_spaces, "llm_weight", None, None

        def __init__(self):
            self.vectors = []

        def hybrid_settings(self, hybrid, weight):
            return hybrid, 0.5

        def rank(self, vector, text, instruction, k, filter, hybrid, weight):
            self.vectors.append(vector)
            return []

        def reader(self):  # no second stage: the model has no reader
            return None

        def close(self):
            pass

    index = RecordingIndex()
    with TestClient(create_app(ServerState(two_spaces, ServeOptions(), index))) as client:
        response = client.post(
            "/v1/search", json={"query": QUERIES[0], "instruction": "focus on weight", "llm_weight": 0.8}
        )
        assert response.status_code == 200, response.text
        assert response.json()["llm_weight"] == 0.8
        response = client.post("/v1/search", json={"query": QUERIES[0], "llm_weight": 2})
        assert response.status_code == 400 and response.json()["error"]["param"] == "llm_weight"
    np.testing.assert_allclose(
        index.vectors[0], weighted(two_spaces, QUERIES[:1], ["focus on weight"], 0.8)[0], atol=1e-5
    )
    assert len(index.vectors) == 1


def test_a_model_of_one_space_refuses_llm_weight(tiny_encoder):
    with TestClient(create_app(ServerState(tiny_encoder, ServeOptions()))) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert card["llm_weight"] is None and card["document_instruction"] is True
        assert card["max_length"] == card["query_max_length"] == 64 and card["document_token_limit"] == 60
        response = client.post("/v1/embeddings", json={"input": QUERIES, "llm_weight": 0.5})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "one space" in error["message"] and "two-space" in error["message"]
        assert error["code"] == "llm_weight_unsupported" and error["param"] == "llm_weight"


def test_search_explains_each_hit_in_both_spaces(two_spaces, tmp_path):
    """/v1/search with explain: each hit's cosine per space, the weight, the weighted sum and the
    score (the hit's own), as `instemb-rag query --explain --json`."""
    from instemb_rag.encoder.composed.encoder import two_spaces_scale
    from instemb_rag.index import Index, Indexer, IndexOptions

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tent.txt").write_text("this tent is light and packed size is compact .")
    (docs / "stove.txt").write_text("the stove is heavy but the burner is durable .")
    Indexer(two_spaces, IndexOptions(index_dir=tmp_path / "index", chunk_overlap=4)).run(
        docs
    )  # a tiny sentence encoder: 30 tokens
    index = Index.open(tmp_path / "index", encoder=two_spaces)
    with TestClient(create_app(ServerState(two_spaces, ServeOptions(), index))) as client:
        body = {"query": QUERIES[0], "instruction": "focus on weight", "llm_weight": 0.3, "explain": True}
        response = client.post("/v1/search", json=body)
        assert response.status_code == 200, response.text
        hits = response.json()["hits"]
        assert len(hits) == 2
        for hit in hits:
            parts = hit["explain"]
            assert parts["llm_weight"] == pytest.approx(0.3)
            assert parts["weighted"] == pytest.approx(0.3 * parts["llm"] + 0.7 * parts["sentence_encoder"], abs=1e-6)
            assert parts["score"] == pytest.approx(parts["weighted"] * two_spaces_scale(0.3), abs=1e-6)
            assert parts["score"] == pytest.approx(hit["score"], abs=1e-4)
        plain = client.post("/v1/search", json={"query": QUERIES[0]}).json()["hits"]
        assert all("explain" not in hit or hit["explain"] is None for hit in plain)
