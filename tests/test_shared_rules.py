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
    from instemb_rag.tools.reports.training_report import run_summary

    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(json.dumps({"training": {}, "model": {}}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\nnot json\n')
    with pytest.raises(InstEmbError, match=r"metrics\.jsonl:2: not valid JSON"):
        run_summary(run)
