"""`instemb-rag eval` on a small BEIR folder, and the MTEB adapter called the way MTEB calls it."""

from __future__ import annotations

import enum
import json

import numpy as np
import pytest
from helpers import write_beir_folder
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.eval.mteb_adapter import MTEBInstEmb


def test_eval_cli_prints_table_and_writes_json(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    folder = write_beir_folder(tmp_path / "gear")
    output = tmp_path / "out" / "results.json"
    args = [
        "eval",
        str(folder),
        "--model",
        str(tiny_model_dir),
        "--lookahead",
        "2",
        "--pooling",
        "input_last",
        "--max-queries",
        "2",
        "--max-docs",
        "4",
        "--device",
        "cpu",
        "--no-progress",
        "-o",
        str(output),
    ]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "gear" in result.output and "ndcg@10" in result.output
    assert "kept all" in result.output  # the sub-sampling note is shown
    saved = json.loads(output.read_text())["results"]
    assert saved[0]["task"] == "gear"
    assert saved[0]["encoder"]["pooling"] == "input_last" and saved[0]["encoder"]["lookahead_length"] == 2
    assert saved[0]["counts"] == {"queries": 2, "documents": 4}
    assert list((tmp_path / "home" / "eval_embeddings").iterdir()), "corpus embeddings were cached under INSTEMB_HOME"

    again = CliRunner().invoke(app, args, terminal_width=200)
    assert again.exit_code == 0 and json.loads(output.read_text())["results"][0]["corpus_from_cache"] is True


def test_eval_cli_reports_bad_task_without_traceback(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(
        app, ["eval", "no-such-task", "--model", str(tiny_model_dir), "--device", "cpu", "-o", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 2
    assert "Unknown task 'no-such-task'" in result.output
    assert not (tmp_path / "r.json").exists()


class PromptType(str, enum.Enum):
    """The values of mteb.encoder_interface.PromptType (mteb itself is not installed)."""

    query = "query"
    passage = "passage"


def test_mteb_v1_call_signature_with_followir_instructions(tiny_encoder):
    model = MTEBInstEmb(tiny_encoder, default_query_instruction="find gear reviews")
    queries = ["light tent", "compact stove"]
    combined = [model.combine_query_and_instruction(q, i) for q, i in zip(queries, ["focus on durability", ""])]
    embedded = model.encode(
        combined, task_name="Core17InstructionRetrieval", prompt_type=PromptType.query, batch_size=2
    )
    expected = tiny_encoder.encode_queries(queries, ["focus on durability", "find gear reviews"])
    np.testing.assert_allclose(embedded, expected, atol=1e-5)

    passages = model.encode(["the tent is light", "a gas stove"], task_name="X", prompt_type=PromptType.passage)
    np.testing.assert_allclose(passages, tiny_encoder.encode_documents(["the tent is light", "a gas stove"]), atol=1e-5)
    # The instruction really reaches the encoder: a different one changes the query vector.
    assert not np.allclose(embedded[1], tiny_encoder.encode_queries(["compact stove"], None)[0], atol=1e-4)


def test_mteb_corpus_records_and_v2_batches(tiny_encoder):
    model = MTEBInstEmb(tiny_encoder, query_instructions={"SciFact": "find a study"})
    records = [{"title": "tent", "text": "light and durable"}, {"title": "", "text": "a stove"}]
    np.testing.assert_allclose(
        model.encode(records, task_name="SciFact", prompt_type="passage"),
        tiny_encoder.encode_documents(["tent\nlight and durable", "a stove"]),
        atol=1e-5,
    )

    class TaskMetadata:
        name = "SciFact"

    batches = [{"text": ["light tent", "stove"], "instruction": ["focus on weight", None]}, {"text": ["rain"]}]
    embedded = model.encode(batches, task_metadata=TaskMetadata(), prompt_type=PromptType.query)
    expected = tiny_encoder.encode_queries(
        ["light tent", "stove", "rain"], ["focus on weight", "find a study", "find a study"]
    )
    np.testing.assert_allclose(embedded, expected, atol=1e-5)
    with pytest.raises(TypeError, match="expected strings or dict batches"):
        model.encode([3.5], task_name="SciFact")
