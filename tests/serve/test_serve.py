"""`instemb-rag serve` as a real process on an ephemeral loopback port, with the tiny model:
OpenAI schema, instructions, dynamic batching, auth, limits and errors, search = `query --json`,
the OpenAI client, graceful shutdown."""

from __future__ import annotations

import base64
import functools
import json
import socket
import threading

import httpx
import numpy as np
import pytest
from testing import start_server
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.index import EXIT_BAD_INPUT, EXIT_INDEX_FOLDER

KEY = "test-key-15"
TIMEOUT = 300  # generous: the machine may be shared with heavy jobs; nothing here is timed
get = functools.partial(httpx.get, timeout=TIMEOUT)
post = functools.partial(httpx.post, timeout=TIMEOUT)
AUTH = {"Authorization": f"Bearer {KEY}"}
runner = CliRunner()

QUERIES = [
    ("which tent is light ?", "focus on weight"),
    ("which tent is light ?", "focus on durability"),
    ("the stove burner is good for a cold night", None),
    ("what backpack frame and strap do you review for a long trip in rain and wind ?", "focus on packed size"),
]


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def corpus(tiny_model_dir, tmp_path_factory):
    """A small index built by `instemb-rag index` with the tiny model."""
    root = tmp_path_factory.mktemp("serve")
    docs = root / "docs"
    (docs / "tents").mkdir(parents=True)
    (docs / "tents" / "ridge.md").write_text("the tent is durable nylon . good in rain and wind .")
    (docs / "tents" / "wisp.md").write_text("this tent is light and packed size is compact .")
    (docs / "stove.txt").write_text("the stove is heavy but the burner is durable .")
    (docs / "pack.txt").write_text("the backpack frame and strap are good for a long trip .")
    index_dir = root / "index"
    code, output = cli(
        "index",
        str(docs),
        "--index-dir",
        str(index_dir),
        "--no-progress",
        "--model",
        str(tiny_model_dir),
        "--device",
        "cpu",
    )
    assert code == 0, output
    return root, index_dir


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    """The same encoder the server loads (same folder, same defaults), in this process."""
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")


@pytest.fixture(scope="module")
def server(corpus):
    """Index, API key and small request limits; batching on with a short window."""
    root, index_dir = corpus
    with start_server(
        ["--index-dir", str(index_dir), "--device", "cpu", "--max-inputs", "8", "--max-chars", "300", "--max-k", "10"],
        root / "server.log",
        env={"INSTEMB_API_KEY": KEY},
    ) as process:
        yield process


@pytest.fixture()
def client(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=TIMEOUT) as session:
        yield session


def embed(client, **body) -> dict:
    response = client.post("/v1/embeddings", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def vectors_of(payload: dict) -> np.ndarray:
    rows = sorted(payload["data"], key=lambda item: item["index"])
    return np.array([row["embedding"] for row in rows], dtype=np.float32)


def assert_openai_error(response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    for word in words:
        assert word in error["message"], error["message"]
    return error


# ------------------------------------------------------------------ schema


def test_health_models_and_docs(server, client, encoder):
    health = get(server.url + "/health").json()  # no key needed
    assert health["status"] == "ok" and health["dimension"] == 64
    assert health["fingerprint"] == encoder.fingerprint
    assert health["index"]["chunks"] == 4 and health["index"]["store"] == "faiss"
    models = client.get("/v1/models").json()
    assert models["object"] == "list"
    [card] = models["data"]
    assert card["id"].startswith("tiny_llama")  # the model folder's name
    assert card["dimension"] == 64 and card["fingerprint"] == encoder.fingerprint
    assert client.get(f"/v1/models/{card['id']}").json()["id"] == card["id"]
    schema = client.get("/openapi.json").json()
    assert {"/v1/embeddings", "/v1/search", "/v1/models", "/health"} <= set(schema["paths"])
    request_fields = schema["components"]["schemas"]["EmbeddingRequest"]["properties"]
    assert {"input", "model", "encoding_format", "instruction", "input_type"} <= set(request_fields)
    assert client.get("/docs").status_code == 200


def test_embeddings_follow_the_openai_schema(client, encoder):
    texts = [text for text, _ in QUERIES[:3]]
    payload = embed(client, input=texts, model=client.get("/v1/models").json()["data"][0]["id"])
    assert payload["object"] == "list" and payload["model"].startswith("tiny_llama")
    assert [item["index"] for item in payload["data"]] == [0, 1, 2]
    assert all(item["object"] == "embedding" for item in payload["data"])
    expected_tokens = sum(len(encoder.build_ids(text, None)) for text in texts)
    assert payload["usage"] == {"prompt_tokens": expected_tokens, "total_tokens": expected_tokens}
    got = vectors_of(payload)
    np.testing.assert_allclose(got, encoder.encode_queries(texts, None), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)

    # base64: little-endian float32, the same numbers
    packed = embed(client, input=texts, encoding_format="base64")
    decoded = np.array([np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4") for item in packed["data"]])
    np.testing.assert_array_equal(decoded, got)

    # a single string is one input; model may be left out
    single = embed(client, input=texts[0])
    assert len(single["data"]) == 1
    np.testing.assert_allclose(vectors_of(single)[0], got[0], atol=1e-5)


def test_instruction_changes_the_vector(client, encoder):
    query = "which tent is light ?"
    weight = vectors_of(embed(client, input=[query], instruction="focus on weight"))[0]
    durability = vectors_of(embed(client, input=[query], instruction="focus on durability"))[0]
    bare = vectors_of(embed(client, input=[query]))[0]
    assert not np.allclose(weight, durability, atol=1e-3)
    assert not np.allclose(weight, bare, atol=1e-3)
    np.testing.assert_allclose(weight, encoder.encode_queries([query], "focus on weight")[0], atol=1e-5)

    # one instruction per input; null / "" mean none
    texts = [text for text, _ in QUERIES]
    instructions = [instruction for _, instruction in QUERIES]
    per_input = vectors_of(embed(client, input=texts, instruction=instructions))
    np.testing.assert_allclose(per_input, encoder.encode_queries(texts, instructions), atol=1e-5)
    with_empty = vectors_of(embed(client, input=texts[:2], instruction=["", "focus on durability"]))
    np.testing.assert_allclose(with_empty[0], bare, atol=1e-5)

    # documents go through encode_documents (one instruction, or none)
    docs = ["the tent is durable nylon .", "the stove is heavy ."]
    documents = vectors_of(embed(client, input=docs, input_type="document"))
    np.testing.assert_allclose(documents, encoder.encode_documents(docs), atol=1e-5)
    under = vectors_of(embed(client, input=docs, input_type="document", instruction="what is this"))
    np.testing.assert_allclose(under, encoder.encode_documents(docs, "what is this"), atol=1e-5)


# ------------------------------------------------------------------ auth and bad input


def test_api_key_is_required_when_set(server):
    body = {"input": ["which tent ?"]}
    missing = post(server.url + "/v1/embeddings", json=body)
    error = assert_openai_error(missing, 401, "Authorization: Bearer", "INSTEMB_API_KEY")
    assert error["code"] == "invalid_api_key"
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = post(server.url + "/v1/embeddings", json=body, headers={"Authorization": "Bearer nope"})
    assert_openai_error(wrong, 401, "Wrong API key")
    assert_openai_error(post(server.url + "/v1/search", json={"query": "tent"}), 401)
    assert_openai_error(get(server.url + "/v1/models"), 401)
    assert post(server.url + "/v1/embeddings", json=body, headers=AUTH).status_code == 200
    assert get(server.url + "/health").status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"input": []}, 400, ["empty list"]),
        ({"input": ["tent", "  "]}, 400, ["input[1] is empty"]),
        ({"input": [[1, 2, 3]]}, 400, ["token ids"]),
        ({"input": [1, 2, 3]}, 400, ["token ids"]),
        ({"input": ["tent", {"a": 1}]}, 400, ["input[1] is dict"]),
        ({}, 400, ["input", "Field required"]),
        ({"input": ["tent"], "encoding_format": "int8"}, 400, ["encoding_format"]),
        ({"input": ["a", "b"], "instruction": ["one"]}, 400, ["2 inputs but 1 instruction"]),
        ({"input": ["tent"], "dimensions": 32}, 400, ["dimensions=32", "64"]),
        ({"input": ["tent"], "input_type": "passage"}, 400, ["input_type"]),
        ({"input": ["tent"], "model": "text-embedding-3-small"}, 404, ["not served here", "GET /v1/models"]),
        ({"input": ["tent"] * 9}, 413, ["9 items", "at most 8", "--max-inputs"]),
        ({"input": ["tent", "x" * 301]}, 413, ["input[1] has 301 characters", "--max-chars"]),
        ({"input": ["tent"], "instruction": "y" * 301}, 413, ["instruction #0", "--max-chars"]),
    ],
)
def test_bad_embedding_requests_get_openai_errors(client, body, status, words):
    assert_openai_error(client.post("/v1/embeddings", json=body), status, *words)


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"query": " "}, 400, ["query is empty"]),
        ({"query": "tent", "k": 0}, 400, ["k=0", "between 1 and 10"]),
        ({"query": "tent", "k": 11}, 400, ["k=11"]),
        ({"query": "tent", "filter": {"author": "x"}}, 400, ["filter key 'author' is unknown", "source"]),
        ({"query": "tent", "filter": {"source": ""}}, 400, ["filter['source'] is empty"]),
        ({"query": "tent", "top_k": 3}, 400, ["top_k"]),
        ({"query": "x" * 301}, 413, ["query has 301 characters"]),
    ],
)
def test_bad_search_requests_get_openai_errors(client, body, status, words):
    assert_openai_error(client.post("/v1/search", json=body), status, *words)


def test_malformed_json_and_unknown_routes(client):
    broken = client.post("/v1/embeddings", content=b'{"input": ["tent"', headers={"content-type": "application/json"})
    assert_openai_error(broken, 400, "not valid JSON")
    assert_openai_error(client.get("/v1/nothing"), 404, "No route GET /v1/nothing")
    assert_openai_error(client.get("/v1/embeddings"), 405)


def test_oversized_body_is_refused_before_parsing(client):
    # max_inputs 8 x max_chars 300: no valid request comes near 2 MB, so it is refused unread.
    response = client.post("/v1/embeddings", json={"input": ["tent " * 400_000]})
    assert_openai_error(response, 413, "request body", "--max-chars")


# ------------------------------------------------------------------ search


@pytest.mark.parametrize(
    ("query", "instruction", "k", "filters"),
    [
        ("which tent is light ?", "focus on weight", 3, None),
        ("which tent is light ?", "focus on durability", 4, None),
        ("the stove burner", None, 2, None),
        ("which tent is durable in rain ?", "focus on durability", 5, {"source": "tents/*"}),
        ("which tent is durable in rain ?", None, 5, {"source": "stove.txt"}),
    ],
)
def test_search_equals_query_json(corpus, client, query, instruction, k, filters):
    _, index_dir = corpus
    args = ["query", query, "--index-dir", str(index_dir), "-k", str(k), "--json", "--device", "cpu"]
    if instruction:
        args += ["--instruction", instruction]
    for key, value in (filters or {}).items():
        args += ["--filter", f"{key}={value}"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    expected = json.loads(result.stdout)
    response = client.post("/v1/search", json={"query": query, "instruction": instruction, "k": k, "filter": filters})
    assert response.status_code == 200, response.text
    got = response.json()
    assert set(got) == {"query", "instruction", "hits"}
    assert (got["query"], got["instruction"]) == (expected["query"], expected["instruction"])
    assert len(got["hits"]) == len(expected["hits"]) > 0
    for mine, theirs in zip(got["hits"], expected["hits"]):
        assert {key: mine[key] for key in mine if key != "score"} == {
            key: theirs[key] for key in theirs if key != "score"
        }
        assert mine["score"] == pytest.approx(theirs["score"], abs=1e-5)
    if filters:
        assert all(hit["source"].startswith(filters["source"].rstrip("*")) for hit in got["hits"])


@pytest.mark.parametrize(("mode", "weight"), [("rrf", None), ("z", 0.7)])
def test_hybrid_search_equals_query_json(corpus, client, mode, weight):
    _, index_dir = corpus
    query, instruction = "durable burner", "focus on the stove"
    args = ["query", query, "-i", instruction, "--index-dir", str(index_dir), "--json", "--device", "cpu"]
    args += ["--hybrid", mode] + (["--hybrid-weight", str(weight)] if weight is not None else [])
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    expected = json.loads(result.stdout)
    body = {"query": query, "instruction": instruction, "k": 4, "hybrid": mode}
    if weight is not None:
        body["hybrid_weight"] = weight
    got = client.post("/v1/search", json=body).json()
    assert got["hybrid"] == expected["hybrid"] == {"mode": mode, "weight": weight if weight is not None else 0.5}
    assert [(h["chunk_id"], h["dense_rank"], h["lexical_rank"]) for h in got["hits"]] == [
        (h["chunk_id"], h["dense_rank"], h["lexical_rank"]) for h in expected["hits"]
    ]
    assert [h["score"] for h in got["hits"]] == pytest.approx([h["score"] for h in expected["hits"]], abs=1e-5)
    assert got["hits"][0]["source"] == "stove.txt" and got["hits"][0]["lexical_rank"] == 1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"query": "tent", "hybrid": "bm25"}, ["hybrid"]),
        ({"query": "tent", "hybrid_weight": 0.5}, ["hybrid_weight needs hybrid"]),
        ({"query": "tent", "hybrid": "rrf", "hybrid_weight": 1.5}, ["hybrid_weight=1.5", "between 0 and 1"]),
    ],
)
def test_bad_hybrid_search_requests_get_openai_errors(client, body, words):
    assert_openai_error(client.post("/v1/search", json=body), 400, *words)


def test_instruction_reorders_or_rescores_search(client):
    weight = client.post("/v1/search", json={"query": "which tent ?", "instruction": "focus on weight", "k": 4}).json()
    durability = client.post(
        "/v1/search", json={"query": "which tent ?", "instruction": "focus on durability", "k": 4}
    ).json()
    assert [hit["score"] for hit in weight["hits"]] != [hit["score"] for hit in durability["hits"]]


# ------------------------------------------------------------------ the OpenAI client


def test_openai_client_works_unchanged(server, encoder):
    from openai import OpenAI

    client = OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=TIMEOUT)
    model = client.models.list().data[0].id
    texts = [text for text, _ in QUERIES[:3]]
    result = client.embeddings.create(model=model, input=texts)  # the client asks for base64 and decodes it
    assert [item.index for item in result.data] == [0, 1, 2]
    assert result.usage.prompt_tokens > 0 and result.model == model
    np.testing.assert_allclose(
        np.array([item.embedding for item in result.data]), encoder.encode_queries(texts), atol=1e-5
    )
    floats = client.embeddings.create(model=model, input=texts[0], encoding_format="float")
    np.testing.assert_allclose(floats.data[0].embedding, result.data[0].embedding, atol=1e-6)
    instructed = client.embeddings.create(model=model, input=[texts[0]], extra_body={"instruction": "focus on weight"})
    np.testing.assert_allclose(
        instructed.data[0].embedding, encoder.encode_queries([texts[0]], "focus on weight")[0], atol=1e-5
    )

    import openai

    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).embeddings.create(model=model, input="tent")
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model=model, input=[])
    assert "empty list" in str(caught.value)


# ------------------------------------------------------------------ batching and shutdown


@pytest.fixture(scope="module")
def batching_server(tiny_model_dir, tmp_path_factory):
    """A long window (10 min) and room for 4 inputs: a batch fires as soon as 4 inputs are waiting."""
    log = tmp_path_factory.mktemp("serve_batching") / "server.log"
    with start_server(
        ["--model", str(tiny_model_dir), "--device", "cpu", "--max-batch-size", "4", "--max-wait-ms", "600000"], log
    ) as process:
        yield process


def concurrently(fn, arguments: list) -> list:
    results: list = [None] * len(arguments)
    errors: list = []

    def call(position: int, argument) -> None:
        try:
            results[position] = fn(argument)
        except BaseException as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=call, args=(i, argument)) for i, argument in enumerate(arguments)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    return results


def test_concurrent_queries_with_different_instructions_share_one_forward_pass(batching_server, encoder):
    url = batching_server.url
    before = get(url + "/health").json()["batching"]

    def one(pair):
        text, instruction = pair
        response = post(url + "/v1/embeddings", json={"input": [text], "instruction": instruction}, timeout=300)
        assert response.status_code == 200, response.text
        return vectors_of(response.json())[0]

    batched = concurrently(one, QUERIES)
    after = get(url + "/health").json()["batching"]
    assert after["forward_batches"] - before["forward_batches"] == 1  # four requests, one pass
    assert after["largest_batch"] == 4
    for (text, instruction), vector in zip(QUERIES, batched):
        single = encoder.encode_queries([text], [instruction])[0]
        np.testing.assert_allclose(vector, single, atol=1e-4)


def test_search_needs_an_index(batching_server):
    response = post(batching_server.url + "/v1/search", json={"query": "tent"})
    assert_openai_error(response, 404, "--index-dir")


def test_busy_server_answers_503_and_shutdown_finishes_in_flight_requests(tiny_model_dir, tmp_path, encoder):
    server = start_server(
        [
            "--model",
            str(tiny_model_dir),
            "--device",
            "cpu",
            "--max-batch-size",
            "4",
            "--max-wait-ms",
            "600000",
            "--max-queue",
            "2",
        ],
        tmp_path / "server.log",
    )
    try:
        text, instruction = QUERIES[0]
        answers: list = []
        waiting = threading.Thread(
            target=lambda: answers.append(
                post(server.url + "/v1/embeddings", json={"input": [text], "instruction": instruction}, timeout=300)
            )
        )
        waiting.start()
        while get(server.url + "/health").json()["batching"]["queued_inputs"] < 1:
            assert waiting.is_alive()
        # One input waits for company (10 minutes' window); two more would pass --max-queue 2.
        busy = post(server.url + "/v1/embeddings", json={"input": ["a tent", "a stove"]})
        assert_openai_error(busy, 503, "busy", "--max-queue")
        assert server.process.poll() is None

        exit_code = server.stop(TIMEOUT)  # SIGTERM while the first request is still waiting
        waiting.join(TIMEOUT)
        assert not waiting.is_alive()
        [answer] = answers
        assert answer.status_code == 200, answer.text
        np.testing.assert_allclose(
            vectors_of(answer.json())[0], encoder.encode_queries([text], [instruction])[0], atol=1e-4
        )
        assert exit_code in (0, -15)
        assert "stopped after 1 forward batches (1 inputs); index closed" in server.log()
        with pytest.raises(httpx.ConnectError):
            get(server.url + "/health")
    finally:
        server.stop()


# ------------------------------------------------------------------ the command's own errors


def test_serve_refuses_a_missing_index_and_a_busy_port(tmp_path):
    code, output = cli("serve", "--index-dir", str(tmp_path / "nothing"), "--port", "0", "--device", "cpu")
    assert code == EXIT_INDEX_FOLDER
    assert "No index in" in " ".join(output.split()) and "instemb-rag index" in output
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        port = holder.getsockname()[1]
        code, output = cli("serve", "--port", str(port), "--device", "cpu")
        assert code == EXIT_BAD_INPUT
        assert f"cannot listen on 127.0.0.1:{port}" in " ".join(output.split()) and "--port" in output
    finally:
        holder.close()
