"""`instemb-rag compare`: two encoders' saved results paired item by item (eval/compare.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import write_beir_folder
from typer.testing import CliRunner

from instemb_rag.cli import app


def run_eval(tmp_path, model_dir, folder, name: str, pooling: str, max_queries: str = "3") -> dict:
    output = tmp_path / f"{name}.json"
    args = ["eval", str(folder), "--model", str(model_dir), "--lookahead", "2", "--pooling", pooling]
    args += ["--max-queries", max_queries, "--max-docs", "4", "--device", "cpu", "--no-progress", "-o", str(output)]
    result = CliRunner().invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, result.output
    return output


def test_results_keep_per_item_values_and_compare_pairs_them(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    folder = write_beir_folder(tmp_path / "gear")
    first = run_eval(tmp_path, tiny_model_dir, folder, "daap", "daap")
    second = run_eval(tmp_path, tiny_model_dir, folder, "last", "input_last")
    result = json.loads(first.read_text())["results"][0]
    # One value per scored query, whose mean is the reported metric.
    assert len(result["per_item"]["ndcg@10"]) == result["counts"]["queries"] == 3
    assert np.mean(result["per_item"]["ndcg@10"]) == pytest.approx(result["metrics"]["ndcg@10"], abs=1e-5)

    out = tmp_path / "paired.json"
    compared = CliRunner().invoke(app, ["compare", str(first), str(second), "-o", str(out)], terminal_width=200)
    assert compared.exit_code == 0, compared.output
    assert "ndcg@10" in compared.output and "paired gains" in compared.output
    rows = {row["metric"]: row for row in json.loads(out.read_text())["rows"]}
    theirs = json.loads(second.read_text())["results"][0]
    expected = np.mean(result["per_item"]["ndcg@10"]) - np.mean(theirs["per_item"]["ndcg@10"])
    assert rows["ndcg@10"]["gain"] == pytest.approx(expected, abs=1e-4)
    low, high = rows["ndcg@10"]["interval"]
    assert low <= rows["ndcg@10"]["gain"] <= high

    itself = CliRunner().invoke(app, ["compare", str(first), str(first), "-o", str(out)])
    assert itself.exit_code == 0
    assert all(row["gain"] == 0 and row["interval"] == [0, 0] for row in json.loads(out.read_text())["rows"])


def test_compare_refuses_results_of_different_items(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("INSTEMB_HOME", str(tmp_path / "home"))
    folder = write_beir_folder(tmp_path / "gear")
    three = run_eval(tmp_path, tiny_model_dir, folder, "three", "daap", "3")
    two = run_eval(tmp_path, tiny_model_dir, folder, "two", "daap", "2")
    result = CliRunner().invoke(app, ["compare", str(three), str(two)])
    assert result.exit_code == 2
    assert "different items" in result.output and "same task options" in result.output
    (tmp_path / "not.json").write_text("{")
    bad = CliRunner().invoke(app, ["compare", str(tmp_path / "not.json"), str(two)])
    assert bad.exit_code == 2 and "is not JSON" in bad.output
    missing = CliRunner().invoke(app, ["compare", str(tmp_path / "absent.json"), str(two)])
    assert missing.exit_code == 2 and "not found" in missing.output
