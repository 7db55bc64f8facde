"""`query --explain` on a model of one space (issue 55): its score is its one cosine, computed
once (the explanation is the search's own number, not a second computation that differs in the
7th digit), no column repeating the score, and with --hybrid the two scores the hit's score fuses."""

from __future__ import annotations

import json

import pytest
from helpers import index_cli_args
from testing import TENT_DOCS
from typer.testing import CliRunner

from instemb_rag.cli import app

DOCS = TENT_DOCS
QUERY = "which tent is light ?"
runner = CliRunner()


@pytest.fixture(scope="module")
def one_space_index(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("explain_one_space")
    docs, index_dir = folder / "docs", folder / "index"
    for relative, text in DOCS.items():
        (docs / relative).parent.mkdir(parents=True, exist_ok=True)
        (docs / relative).write_text(text)
    result = runner.invoke(app, index_cli_args(docs, index_dir, tiny_model_dir))
    assert result.exit_code == 0, result.output
    return index_dir, ["--index-dir", str(index_dir), "--model", str(tiny_model_dir), "--device", "cpu"]


def query(index, *args: str) -> str:
    result = runner.invoke(
        app, ["query", QUERY, "-i", "focus on weight", "-k", "4", *index[1], *args], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def header(table: str) -> str:
    return next(line for line in table.splitlines() if "score" in line and "source" in line)


def test_dense_explain_is_the_score_itself_and_says_it_adds_nothing(one_space_index):
    document = json.loads(query(one_space_index, "--explain", "--json"))
    assert document["explain"]["spaces"] == 1
    for hit in document["hits"]:
        assert hit["explain"] == {"cosine": hit["score"]}  # one computation: the very number
    table = query(one_space_index, "--explain")
    flat = " ".join(table.split())
    assert "this model has one space" in flat and "nothing to add" in flat and "--hybrid" in flat, table
    assert "cosine" not in header(table), table  # no column repeating the score


def test_hybrid_explain_shows_the_two_scores_the_hit_fuses(one_space_index):
    document = json.loads(query(one_space_index, "--hybrid", "--explain", "--json"))
    assert "bm25" in document["explain"]["score"]
    dense = {hit["chunk_id"]: hit["score"] for hit in json.loads(query(one_space_index, "-k", "10", "--json"))["hits"]}
    for hit in document["hits"]:
        parts = hit["explain"]
        assert set(parts) == {"cosine", "bm25"}, parts
        assert parts["cosine"] == pytest.approx(dense[hit["chunk_id"]], abs=1e-5)  # the dense side's cosine
        assert (parts["bm25"] > 0) == (hit["lexical_rank"] is not None), hit  # 0: no query word in it
    assert any(hit["explain"]["bm25"] > 0 for hit in document["hits"])
    table = query(one_space_index, "--hybrid", "--explain")
    assert "cosine" in header(table) and "bm25" in header(table), table
    assert "one space, hybrid" in " ".join(table.split()), table
