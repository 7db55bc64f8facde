"""InstEmbEmbedding(base_url=...): embeddings from a running `instemb-rag serve`, no torch here."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from testing import start_server  # tests/testing.py, put on the path by conftest.py
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.errors import InstEmbError
from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever

KEY = "remote-key"
TIMEOUT = 300.0  # generous: the machine may be shared with heavy jobs; nothing here is timed


@pytest.fixture(scope="module")
def local_encoder(tiny_model_dir):
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")  # what the server loads


@pytest.fixture(scope="module")
def index_dir(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("remote_index")
    docs = root / "docs"
    docs.mkdir()
    (docs / "tent.md").write_text("the tent is durable nylon . good in rain and wind .")
    (docs / "light.md").write_text("this tent is light and packed size is compact .")
    (docs / "stove.txt").write_text("the stove is heavy but the burner is durable .")
    result = CliRunner().invoke(
        app,
        [
            "index",
            str(docs),
            "--index-dir",
            str(root / "index"),
            "--no-progress",
            "--model",
            str(tiny_model_dir),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    return root / "index"


@pytest.fixture(scope="module")
def server(index_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("remote_server") / "server.log"
    with start_server(["--index-dir", str(index_dir), "--device", "cpu"], log, env={"INSTEMB_API_KEY": KEY}) as process:
        yield process


def test_remote_embeddings_equal_local_ones(server, local_encoder, tiny_docs):
    remote = InstEmbEmbedding(
        base_url=server.url, api_key=KEY, query_instruction="focus on weight", embed_batch_size=2, timeout=TIMEOUT
    )
    assert remote.is_remote and remote.dimension == 64
    assert remote.fingerprint == local_encoder.fingerprint
    assert remote.model_name.startswith("tiny_llama")
    query = "which tent is light ?"
    np.testing.assert_allclose(
        remote.get_query_embedding(query), local_encoder.encode_queries([query], "focus on weight")[0], atol=1e-5
    )
    np.testing.assert_allclose(
        remote.get_query_embedding_for(query, "focus on durability"),
        local_encoder.encode_queries([query], "focus on durability")[0],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        remote.get_query_embedding_for(query, ""), local_encoder.encode_queries([query])[0], atol=1e-5
    )
    np.testing.assert_allclose(
        np.array(remote.get_text_embedding_batch(tiny_docs)),  # 5 texts, batches of 2
        local_encoder.encode_documents(tiny_docs),
        atol=1e-5,
    )
    got = asyncio.run(remote.aget_query_embedding(query))
    np.testing.assert_allclose(got, local_encoder.encode_queries([query], "focus on weight")[0], atol=1e-5)
    mixed = remote.get_query_embeddings([query, query], ["focus on weight", "focus on durability"])
    assert not np.allclose(mixed[0], mixed[1], atol=1e-4)


def test_remote_errors_say_what_to_do(server, tiny_model_dir):
    with pytest.raises(InstEmbError, match="answered 401.*INSTEMB_API_KEY"):
        InstEmbEmbedding(base_url=server.url, api_key="wrong", timeout=TIMEOUT)
    with pytest.raises(InstEmbError, match="Cannot reach the instemb-rag server.*instemb-rag serve"):
        InstEmbEmbedding(base_url="http://127.0.0.1:9", api_key=KEY, timeout=5)
    with pytest.raises(InstEmbError, match="either base_url"):
        InstEmbEmbedding(str(tiny_model_dir), base_url=server.url)
    remote = InstEmbEmbedding(
        base_url=server.url + "/v1", api_key=KEY, timeout=TIMEOUT
    )  # the OpenAI-style base URL works too
    with pytest.raises(InstEmbError, match="413|400"):
        remote.get_text_embedding_batch(["   "])


def test_an_app_embeds_and_retrieves_without_importing_torch(server, index_dir, local_encoder):
    script = textwrap.dedent(f"""
        import json, sys
        from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever
        embed_model = InstEmbEmbedding(base_url={server.url!r}, api_key={KEY!r}, timeout={TIMEOUT!r})
        vector = embed_model.get_query_embedding_for("which tent is light ?", "focus on weight")
        with InstEmbRetriever.from_instemb_index({str(index_dir)!r}, embed_model=embed_model, similarity_top_k=3) as retriever:
            nodes = retriever.retrieve("which tent is light ?", instruction="focus on weight")
        print(json.dumps({{"torch": "torch" in sys.modules, "transformers": "transformers" in sys.modules,
                          "vector": vector, "hits": [[n.node.metadata["source"], n.score] for n in nodes]}}))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=1200)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    assert result["torch"] is False and result["transformers"] is False
    expected = local_encoder.encode_queries(["which tent is light ?"], "focus on weight")[0]
    np.testing.assert_allclose(result["vector"], expected, atol=1e-5)

    from instemb_rag.index import Index

    with Index.open(index_dir, encoder=local_encoder) as index:
        hits = index.search("which tent is light ?", "focus on weight", k=3)
    assert [source for source, _ in result["hits"]] == [hit.source for hit in hits]
    np.testing.assert_allclose([score for _, score in result["hits"]], [hit.score for hit in hits], atol=1e-5)
    assert InstEmbRetriever  # the same class the app used


def test_the_remote_client_closes_and_round_trips(server, local_encoder):
    with InstEmbEmbedding(base_url=server.url, api_key=KEY, timeout=TIMEOUT) as remote:
        view = remote.with_instruction("focus on weight")
        view.close()  # a view shares the connection and leaves it open
        vector = view.get_query_embedding("which tent is light ?")
        saved = remote.to_dict()
        assert "api_key" not in saved and saved["timeout"] == TIMEOUT
        assert saved["fingerprint"] == local_encoder.fingerprint and saved["base_url"] == server.url
        with InstEmbEmbedding.from_dict(saved, api_key=KEY) as again:
            assert again.get_query_embedding_for("which tent is light ?", "focus on weight") == vector
    assert remote.encoder.closed and again.encoder.closed
    with pytest.raises(InstEmbError, match="is closed"):
        remote.get_query_embedding("which tent is light ?")
    saved["fingerprint"] = "0" * 32
    with pytest.raises(InstEmbError, match=f"saved for encoder {'0' * 32}, but the server"):
        InstEmbEmbedding.from_dict(saved, api_key=KEY)


def test_an_app_that_forgets_close_exits_without_resource_warnings(server):
    script = textwrap.dedent(f"""
        import gc
        from llama_index.embeddings.instemb import InstEmbEmbedding
        embed_model = InstEmbEmbedding(base_url={server.url!r}, api_key={KEY!r}, timeout={TIMEOUT!r})
        embed_model.get_query_embedding_for("which tent is light ?", "focus on weight")
        short_lived = InstEmbEmbedding(base_url={server.url!r}, api_key={KEY!r}, timeout={TIMEOUT!r})
        short_lived.get_text_embedding("the tent is light .")
        del short_lived
        gc.collect()
        print("done")
    """)
    completed = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-X", "dev", "-c", script],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().endswith("done")
    assert "ResourceWarning" not in completed.stderr and "unclosed" not in completed.stderr, completed.stderr
