"""The server with an instruction-effect model (issue 56), in-process: ``instruction_strength`` is a
knob per query request (/v1/embeddings and /v1/search), the model card says the model takes it
(and its default), requests under different strengths never share an encoder call, a bad value or
a model without the knob is a 400 before the request joins a batch, and /v1/search explains each
hit's plain score and the instruction's contribution."""

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
INSTRUCTIONS = ["focus on weight", "focus on warmth"]


@pytest.fixture(scope="module")
def effect(tiny_model_dir, tiny_st_dir):
    from instemb_rag.encoder.load import untrained_effect

    return untrained_effect(
        str(tiny_model_dir), str(tiny_st_dir), instruction_strength=2.0, device="cpu", lookahead_length=2
    )


def vectors_of(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array([item["embedding"] for item in response.json()["data"]])


def test_queries_take_the_strength_and_the_card_says_so(effect):
    with TestClient(create_app(ServerState(effect, ServeOptions()))) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert (
            card["instruction_strength"] == {"default": 2.0, "minimum": 0.0, "maximum": 10.0}
            and card["llm_weight"] is None
        )
        for strength in (0.0, 1.0, 4.5):
            body = {"input": QUERIES, "instruction": INSTRUCTIONS, "instruction_strength": strength}
            expected = effect.encode_queries(QUERIES, INSTRUCTIONS, instruction_strength=strength)
            np.testing.assert_allclose(vectors_of(client.post("/v1/embeddings", json=body)), expected, atol=1e-5)
        default = vectors_of(client.post("/v1/embeddings", json={"input": QUERIES, "instruction": INSTRUCTIONS}))
        np.testing.assert_allclose(default, effect.encode_queries(QUERIES, INSTRUCTIONS), atol=1e-5)

        for body, words in (
            ({"input": QUERIES, "instruction_strength": 10.5}, "between 0 and 10"),
            ({"input": QUERIES, "instruction_strength": -1}, "between 0 and 10"),
            ({"input": DOCUMENTS, "input_type": "document", "instruction_strength": 1.0}, "documents"),
            ({"input": QUERIES, "llm_weight": 0.5}, "instruction-effect model"),
        ):
            response = client.post("/v1/embeddings", json=body)
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert words in error["message"] and error["param"] in ("instruction_strength", "llm_weight")
        assert client.app.state.instemb.batcher.forward_batches == 4  # the refused ones never reached it


def test_requests_under_different_strengths_get_their_own_strengths(effect):
    """Three query requests in one batching window (the batch is full at 2 inputs): the two under
    1.0 share one encoder call, the one under 3.0 gets a call of its own."""
    import httpx

    state = ServerState(effect, ServeOptions(batching=BatchingOptions(max_batch_size=2, max_wait_ms=1_500)))
    asked = [(QUERIES[0], 1.0), (QUERIES[1], 3.0), (QUERIES[1], 1.0)]

    async def together():
        transport = httpx.ASGITransport(app=create_app(state))
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as client:
            requests = [
                client.post(
                    "/v1/embeddings",
                    json={"input": [query], "instruction": "focus on weight", "instruction_strength": strength},
                )
                for query, strength in asked
            ]
            return await asyncio.gather(*requests)

    state.batcher.start()
    try:
        responses = asyncio.run(together())
    finally:
        state.close()
    for response, (query, strength) in zip(responses, asked):
        expected = effect.encode_queries([query], "focus on weight", instruction_strength=strength)[0]
        np.testing.assert_allclose(vectors_of(response)[0], expected, atol=1e-5)
    assert state.batcher.forward_batches == 2 and state.batcher.largest_batch == 2


def test_a_model_without_the_knob_refuses_it(tiny_encoder):
    with TestClient(create_app(ServerState(tiny_encoder, ServeOptions()))) as client:
        assert client.get("/v1/models").json()["data"][0]["instruction_strength"] is None
        response = client.post("/v1/embeddings", json={"input": QUERIES, "instruction_strength": 1.0})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "not an instruction-effect model: it ranks by one space" in error["message"]
        assert error["code"] == "instruction_strength_unsupported" and error["param"] == "instruction_strength"


def test_search_takes_the_strength_and_explains_each_hit(effect, tmp_path):
    """/v1/search embeds the query under the request's strength; with explain, each hit's plain
    score, the instruction's contribution, the strength, their sum and the score (the hit's own)."""
    from instemb_rag.index import Index, Indexer, IndexOptions

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in zip(("tent.txt", "stove.txt"), DOCUMENTS):
        (docs / name).write_text(text)
    Indexer(effect, IndexOptions(index_dir=tmp_path / "index", chunk_overlap=4)).run(docs)
    index = Index.open(tmp_path / "index", encoder=effect)
    with TestClient(create_app(ServerState(effect, ServeOptions(), index))) as client:
        body = {"query": QUERIES[0], "instruction": "focus on weight", "instruction_strength": 3.0, "explain": True}
        response = client.post("/v1/search", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["instruction_strength"] == 3.0
        hits = response.json()["hits"]
        assert len(hits) == 2
        query = effect.encode_queries([QUERIES[0]], "focus on weight", instruction_strength=3.0)[0]
        expected = dict(zip(DOCUMENTS, (effect.encode_documents(DOCUMENTS) @ query).tolist()))
        for hit in hits:
            parts = hit["explain"]
            assert parts["instruction_strength"] == pytest.approx(3.0)
            assert parts["combined"] == pytest.approx(parts["plain"] + parts["instruction"], abs=1e-6)
            assert parts["score"] == pytest.approx(hit["score"], abs=1e-4)
            assert hit["score"] == pytest.approx(expected[hit["text"].strip()], abs=1e-4)
        zero = client.post("/v1/search", json={**body, "instruction_strength": 0}).json()["hits"]
        assert all(hit["explain"]["instruction"] == 0.0 for hit in zero)
        response = client.post("/v1/search", json={"query": QUERIES[0], "instruction_strength": 11})
        assert response.status_code == 400 and response.json()["error"]["param"] == "instruction_strength"
        response = client.post("/v1/search", json={"query": QUERIES[0], "llm_weight": 0.5})
        assert response.status_code == 400 and response.json()["error"]["code"] == "llm_weight_unsupported"
