"""One of each: the instruction rule, the file hasher, the JSON-lines reader, the data root."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from instemb_rag import normalize_instruction
from instemb_rag.cli import app
from instemb_rag.errors import InstEmbError
from instemb_rag.hashing import BLOCK_BYTES, file_sha256
from instemb_rag.index.documents import content_hash
from instemb_rag.jsonl import read_jsonl, read_jsonl_objects
from instemb_rag.paths import data_root


def test_no_instruction_means_none_empty_or_whitespace():
    assert [normalize_instruction(item) for item in (None, "", "  \n")] == [None, None, None]
    assert normalize_instruction(" focus on weight ") == " focus on weight "  # used as given
    with pytest.raises(InstEmbError, match="string or None, not int"):
        normalize_instruction(3)


@pytest.fixture(scope="module")
def tiny_index(tiny_model_dir, tmp_path_factory):
    """An index of three short files built by `instemb-rag index` with the tiny model."""
    from helpers import index_cli_args

    root = tmp_path_factory.mktemp("blank")
    docs = root / "docs"
    docs.mkdir()
    for name, text in (
        ("tent.md", "this tent is light and packed size is compact ."),
        ("stove.txt", "the stove is heavy but the burner is durable ."),
        ("pack.txt", "the backpack frame and strap are good for a long trip ."),
    ):
        (docs / name).write_text(text)
    result = CliRunner().invoke(app, index_cli_args(docs, root / "index", tiny_model_dir))
    assert result.exit_code == 0, result.output
    return root / "index"


@pytest.mark.parametrize("blank", ["", "  \t "])
def test_a_blank_instruction_means_no_instruction_at_every_entry_point(blank, tiny_index, tiny_model_dir):
    """The same blank instruction through the CLI, the server, Index.search and LlamaIndex: each
    ranks (and embeds) the query exactly as with no instruction (instructions.py says why)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("llama_index.embeddings.instemb")
    from fastapi.testclient import TestClient

    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Index
    from instemb_rag.serve import ServeOptions, ServerState, create_app
    from llama_index.embeddings.instemb import InstEmbEmbedding, InstEmbRetriever

    query = "which tent is light ?"

    def ranking(hits) -> list[tuple[str, float]]:
        return [(source, round(float(score), 4)) for source, score in hits]

    def cli_hits(*instruction: str) -> list[tuple[str, float]]:
        arguments = ["query", query, *instruction, "--json", "--index-dir", str(tiny_index), "--device", "cpu"]
        result = CliRunner().invoke(app, arguments)
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["instruction"] is None
        return ranking((hit["source"], hit["score"]) for hit in document["hits"])

    # the command line
    plain = cli_hits()
    assert len(plain) == 3 and cli_hits("--instruction", blank) == plain

    # Index.search, dense and hybrid
    encoder = InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")
    bare_vector = encoder.encode_queries([query])[0]
    with Index.open(tiny_index, encoder=encoder) as index:
        assert ranking((hit.source, hit.score) for hit in index.search(query, blank, k=3)) == plain
        hybrid = [(hit.source, hit.score) for hit in index.search(query, None, k=3, hybrid="rrf")]
        assert [(hit.source, hit.score) for hit in index.search(query, blank, k=3, hybrid="rrf")] == hybrid

    # the server: /v1/search and /v1/embeddings
    state = ServerState.open(ServeOptions(), index_dir=tiny_index, device="cpu")
    with TestClient(create_app(state)) as client:
        response = client.post("/v1/search", json={"query": query, "instruction": blank, "k": 3})
        assert response.status_code == 200, response.text
        assert response.json()["instruction"] is None
        assert ranking((hit["source"], hit["score"]) for hit in response.json()["hits"]) == plain
        response = client.post("/v1/embeddings", json={"input": [query, query], "instruction": [blank, None]})
        assert response.status_code == 200, response.text
        for item in response.json()["data"]:
            np.testing.assert_allclose(item["embedding"], bare_vector, atol=1e-5)

    # LlamaIndex: a blank instruction is none, not the model's default query_instruction
    embed_model = InstEmbEmbedding.from_encoder(encoder, query_instruction="focus on weight")
    np.testing.assert_allclose(embed_model.get_query_embedding_for(query, blank), bare_vector, atol=1e-5)
    with InstEmbRetriever.from_instemb_index(tiny_index, embed_model=embed_model, similarity_top_k=3) as retriever:
        nodes = retriever.retrieve(query, instruction=blank)
    assert ranking((node.metadata["source"], node.score) for node in nodes) == plain


def test_encoder_and_shared_prefix_path_apply_the_same_rule(tiny_encoder):
    texts = ["the tent is durable", "the stove is light"]
    plain = tiny_encoder.encode_queries(texts, None)
    np.testing.assert_array_equal(tiny_encoder.encode_queries(texts, ["", "   "]), plain)
    shared = tiny_encoder.encode_instructions(texts[0], [None, " ", "focus on weight"])
    np.testing.assert_allclose(shared[1], plain[0], atol=1e-5)
    np.testing.assert_allclose(shared[2], tiny_encoder.encode_queries([texts[0]], "focus on weight")[0], atol=1e-5)


def test_file_hasher_streams_the_whole_file(tmp_path):
    path = tmp_path / "big.bin"
    data = bytes(range(256)) * (BLOCK_BYTES // 256 + 3)  # more than one block
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest() == content_hash(path)
    path.write_bytes(data[:-1] + b"x")
    assert file_sha256(path) != hashlib.sha256(data).hexdigest()


def test_jsonl_reader_names_file_and_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3}\n')
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (3, {"a": 2}), (4, {"a": 3})]
    assert read_jsonl_objects(path, limit=2) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(InstEmbError, match=r"rows\.jsonl:2: not valid JSON"):
        read_jsonl_objects(path)
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(InstEmbError, match=r"rows\.jsonl:2: expected a JSON object, got list"):
        read_jsonl_objects(path)

    class RecordsError(InstEmbError):
        pass

    with pytest.raises(RecordsError, match="does not exist"):
        list(read_jsonl(tmp_path / "absent.jsonl", RecordsError))


def test_data_root_rule(monkeypatch, tmp_path):
    for name in ("INSTEMB_DATA_ROOT", "INSTEMB_EVAL_DATA", "INSTEMB_SHARED_DATA"):
        monkeypatch.delenv(name, raising=False)
    checkout = Path(__file__).resolve().parents[1]
    assert data_root() == checkout.parent / "shared" / "data"
    monkeypatch.setenv("INSTEMB_EVAL_DATA", str(tmp_path / "old"))
    assert data_root() == tmp_path / "old"
    monkeypatch.setenv("INSTEMB_DATA_ROOT", str(tmp_path / "new"))
    assert data_root() == tmp_path / "new"


def test_build_data_and_eval_follow_the_data_root(monkeypatch, tmp_path, tiny_model_dir):
    monkeypatch.setenv("INSTEMB_DATA_ROOT", str(tmp_path / "nowhere"))
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["build-data", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "nowhere" in result.output, result.output
    result = CliRunner().invoke(
        app, ["eval", "scifact", "--model", str(tiny_model_dir), "--device", "cpu", "-o", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 2 and "nowhere" in " ".join(result.output.split()), result.output
    assert not (tmp_path / "r.json").exists()


def test_metrics_file_is_read_with_the_shared_reader(tmp_path):
    from tools.reports.training_report import run_summary

    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(json.dumps({"training": {}, "model": {}}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\nnot json\n')
    with pytest.raises(InstEmbError, match=r"metrics\.jsonl:2: not valid JSON"):
        run_summary(run)
