"""The server with a two-tower model (issue 44), in-process: /v1/embeddings embeds documents with
the document sentence encoder and queries with the query LLM; a document instruction is refused (400)
before it joins a batch, so it cannot fail the requests batched with it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from instemb_rag.serve import ServeOptions, ServerState, create_app  # noqa: E402
from instemb_rag.serve.batching import BatchingOptions  # noqa: E402

DOCUMENTS = ["the tent is durable nylon . good in rain and wind .", "the stove is light . fuel gas burner ."]
QUERIES = [("which tent is light ?", "focus on weight"), ("which tent is light ?", None)]


def test_documents_by_the_sentence_encoder_queries_by_the_query_llm(tiny_two_tower, tiny_st_dir):
    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    sentence_encoder = SentenceEncoder.load(str(tiny_st_dir))
    with TestClient(create_app(ServerState(tiny_two_tower, ServeOptions()))) as client:
        response = client.post("/v1/embeddings", json={"input": DOCUMENTS, "input_type": "document"})
        assert response.status_code == 200, response.text
        vectors = np.array([item["embedding"] for item in response.json()["data"]])
        np.testing.assert_allclose(vectors, sentence_encoder.encode(DOCUMENTS), atol=1e-5)
        # usage: the document sentence encoder's tokens (the LLM never read these documents)
        assert response.json()["usage"]["prompt_tokens"] == sum(sentence_encoder.tokens(text) for text in DOCUMENTS)

        texts, instructions = [query for query, _ in QUERIES], [instruction for _, instruction in QUERIES]
        response = client.post("/v1/embeddings", json={"input": texts, "instruction": instructions})
        assert response.status_code == 200, response.text
        vectors = np.array([item["embedding"] for item in response.json()["data"]])
        np.testing.assert_allclose(vectors, tiny_two_tower.encode_queries(texts, instructions), atol=1e-5)
        assert not np.allclose(vectors[0], sentence_encoder.encode([texts[0]])[0], atol=1e-3)

        card = client.get("/v1/models").json()["data"][0]
        assert card["fingerprint"] == tiny_two_tower.fingerprint and card["dimension"] == sentence_encoder.dimension
        # The documents' limits are the document sentence encoder's (32 tokens, 30 of text), not the LLM's 64
        assert card["max_length"] == sentence_encoder.max_length == 32 and card["document_token_limit"] == 30
        assert card["query_max_length"] == 64 and card["document_fingerprint"] == tiny_two_tower.document_fingerprint


@pytest.mark.parametrize("instruction", ["focus on weight", [None, "focus on weight"]])
def test_a_document_instruction_is_refused_with_a_clear_message(tiny_two_tower, instruction):
    with TestClient(create_app(ServerState(tiny_two_tower, ServeOptions()))) as client:
        response = client.post(
            "/v1/embeddings", json={"input": DOCUMENTS, "input_type": "document", "instruction": instruction}
        )
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert "sentence encoder" in error["message"] and "query" in error["message"]
        assert error["param"] == "instruction"
        # A blank instruction means none, as everywhere.
        response = client.post(
            "/v1/embeddings", json={"input": DOCUMENTS, "input_type": "document", "instruction": ["", "  "]}
        )
        assert response.status_code == 200, response.text


def test_a_refused_document_instruction_does_not_fail_the_requests_batched_with_it(tiny_two_tower, tiny_st_dir):
    """Two document requests in one batching window (the batch is full at 4 inputs): the one with
    an instruction gets its 400, the other its vectors."""
    import httpx

    from instemb_rag.encoder.modules.sentence_encoder import SentenceEncoder

    options = ServeOptions(batching=BatchingOptions(max_batch_size=4, max_wait_ms=2_000))
    state = ServerState(tiny_two_tower, options)
    good = ["a light tent .", "a heavy stove .", "a durable backpack ."]

    async def both():
        transport = httpx.ASGITransport(app=create_app(state))
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as client:
            bad = client.post(
                "/v1/embeddings",
                json={"input": ["a tent ."], "input_type": "document", "instruction": "focus on weight"},
            )
            fine = client.post("/v1/embeddings", json={"input": good, "input_type": "document"})
            return await asyncio.gather(bad, fine)

    state.batcher.start()
    try:
        refused, answered = asyncio.run(both())
    finally:
        state.close()
    assert refused.status_code == 400, refused.text
    assert answered.status_code == 200, answered.text
    vectors = np.array([item["embedding"] for item in answered.json()["data"]])
    np.testing.assert_allclose(vectors, SentenceEncoder.load(str(tiny_st_dir)).encode(good), atol=1e-5)
