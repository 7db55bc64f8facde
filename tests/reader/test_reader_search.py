"""The reader everywhere a query goes (issue 67): `Index.search(rerank=...)` and `instemb-rag query`
(--rerank/--no-rerank, --rerank-top, --explain) on a tiny instruction-effect model with a tiny
reader, both built here; a model without a reader answers, and refuses --rerank, by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import index_cli_args
from testing import TENT_DOCS, build_tiny_reader_folder
from typer.testing import CliRunner

from instemb_rag.cli import app

pytest.importorskip("sentence_transformers")

QUERY, INSTRUCTION = "which tent is light ?", "focus on weight"
runner = CliRunner()


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def folders(tiny_model_dir, tiny_st_dir, tmp_path_factory):
    """(plain model folder, the same with a reader, an index built with the plain one)."""
    from instemb_rag.encoder.load import untrained_effect
    from instemb_rag.reader.folder import with_reader

    root = tmp_path_factory.mktemp("reader_search")
    plain = root / "plain"
    untrained_effect(
        str(tiny_model_dir), str(tiny_st_dir), instruction_strength=1.0, device="cpu", lookahead_length=2
    ).save(plain)
    reader = build_tiny_reader_folder(root / "reader", tiny_st_dir)
    both = with_reader(plain, reader, root / "with_reader", top=3)
    docs = root / "docs"
    for relative, text in TENT_DOCS.items():
        (docs / relative).parent.mkdir(parents=True, exist_ok=True)
        (docs / relative).write_text(text)
    code, output = cli(*index_cli_args(docs, root / "index", plain, "--chunk-overlap", "8"))
    assert code == 0, output
    return plain, both, root / "index"


def open_index(index_dir: Path, model: Path):
    from instemb_rag import InstEmbEncoder
    from instemb_rag.index import Index

    return Index.open(index_dir, encoder=InstEmbEncoder.from_pretrained(model, device="cpu"))


def test_index_search_fuses_the_top_hits_as_the_reranker_scores_them(folders):
    from instemb_rag import Reranker

    plain, both, index_dir = folders
    with open_index(index_dir, both) as index:  # an index built before the reader: searched as it is
        first = index.search(QUERY, INSTRUCTION, k=4, rerank=False)
        reread = index.search(QUERY, INSTRUCTION, k=4)
        top2 = index.search(QUERY, INSTRUCTION, k=4, rerank_top=2)
    fused = Reranker.from_pretrained(both).score(
        QUERY, INSTRUCTION, [hit.text for hit in first[:3]], [h.score for h in first[:3]]
    )
    expected = sorted(zip(fused, [hit.chunk_id for hit in first[:3]]), reverse=True)
    assert [(round(hit.score, 5), hit.chunk_id) for hit in reread[:3]] == [(round(s, 5), c) for s, c in expected]
    assert reread[3].chunk_id == first[3].chunk_id and reread[3].score == pytest.approx(first[3].score)
    assert {hit.chunk_id for hit in top2[:2]} == {hit.chunk_id for hit in first[:2]}
    assert all(hit.score >= top2[2].score for hit in top2[:2])


def test_query_command_rerank_options_and_explain(folders):
    _, both, index_dir = folders
    base = ["query", QUERY, "-i", INSTRUCTION, "--json", "--index-dir", str(index_dir), "--model", str(both)]
    code, output = cli(*base, "-k", "3", "--explain")
    assert code == 0, output
    answer = json.loads(output[output.index("{") :])
    rows = [hit["explain"] for hit in answer["hits"]]
    assert all({"first_stage", "reader", "score"} <= set(row) for row in rows)
    assert all(row["score"] == pytest.approx(row["first_stage"] + row["reader"]) for row in rows)
    assert [hit["score"] for hit in answer["hits"]] == pytest.approx([row["score"] for row in rows])
    code, output = cli(*base, "-k", "3", "--no-rerank", "--explain")
    assert code == 0, output
    assert all("reader" not in hit["explain"] for hit in json.loads(output[output.index("{") :])["hits"])
    code, table = cli(
        "query", QUERY, "-i", INSTRUCTION, "--index-dir", str(index_dir), "--model", str(both), "--explain"
    )
    assert code == 0 and "first stage" in table and "reader" in table, table


def test_a_model_without_a_reader_answers_and_refuses_rerank(folders):
    plain, _, index_dir = folders
    base = ["query", QUERY, "-i", INSTRUCTION, "--index-dir", str(index_dir), "--model", str(plain)]
    assert cli(*base)[0] == 0
    code, output = cli(*base, "--rerank")
    assert code == 2 and "has no reader" in output and "--no-rerank" in output, output


def test_more_hits_than_the_index_holds_and_a_blank_instruction(folders):
    _, both, index_dir = folders
    with open_index(index_dir, both) as index:
        everything = index.search(QUERY, "  ", k=100)
        assert 0 < len(everything) < 100
        assert [hit.score for hit in everything] == sorted((hit.score for hit in everything), reverse=True)
