"""Hybrid search on the tiny model: the catalog's full-text index (FTS5) beside the dense search,
for both stores, on a new index and on one built before the full-text index existed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import fulltext_matches_chunks, index_cli_args
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index import BadInputError, Index, IndexFolderError
from instemb_rag.index.catalog import CATALOG_FILE
from instemb_rag.index.fusion import DEFAULT_MODE, RRF_K

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOCS = {
    "tents/ridge.md": "the tent is durable nylon . good in rain and wind .",
    "tents/light.md": "a light tent . packed size 30 cm . weight 1 kg .",
    "stove.txt": "the stove is light . fuel gas burner .",
    "pack.txt": "the backpack strap and frame are heavy but durable .",
    "notes/kerosene.md": "kerosene lamps smell , but kerosene burns in the cold .",
}
runner = CliRunner()


@pytest.fixture()
def cli_encoder(tiny_model_dir):
    """The tiny model as the CLI loads it (its default options), so its fingerprint is the index's."""
    from instemb_rag import InstEmbEncoder

    return InstEmbEncoder.from_pretrained(tiny_model_dir, device="cpu")


def write_docs(folder: Path) -> Path:
    for relative, text in DOCS.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def index(docs: Path, index_dir: Path, model_dir: Path, *extra: str):
    result = runner.invoke(app, index_cli_args(docs, index_dir, model_dir, *extra))
    assert result.exit_code == 0, result.output
    return result


def query_json(index_dir: Path, model_dir: Path, *args: str) -> dict:
    command = ["query", *args, "--index-dir", str(index_dir), "--model", str(model_dir), "--device", "cpu", "--json"]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def drop_fulltext(index_dir: Path) -> None:
    """The catalog as versions before the full-text index wrote it: no FTS table, triggers or mark."""
    db = sqlite3.connect(index_dir / CATALOG_FILE)
    for statement in (
        "DROP TRIGGER chunks_fts_insert",
        "DROP TRIGGER chunks_fts_delete",
        "DROP TRIGGER chunks_fts_update",
        "DROP TABLE chunks_fts",
        "DELETE FROM meta WHERE key = 'fulltext_version'",
    ):
        db.execute(statement)
    db.commit()
    db.close()


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_hybrid_query_fuses_both_sides_and_reports_their_ranks(tiny_model_dir, tmp_path, store):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    index(docs, index_dir, tiny_model_dir, "--store", store)
    dense = query_json(index_dir, tiny_model_dir, "kerosene lamp", "-k", "5")
    assert all("dense_rank" not in hit for hit in dense["hits"])  # dense output is as it was

    bare = query_json(index_dir, tiny_model_dir, "--hybrid", "kerosene lamp", "-k", "5")
    assert bare["hybrid"] == {"mode": DEFAULT_MODE, "weight": 0.5}
    fused = query_json(index_dir, tiny_model_dir, "kerosene lamp", "--hybrid", "rrf", "-k", "5")
    dense_order = [hit["chunk_id"] for hit in dense["hits"]]
    for hit in fused["hits"]:
        assert hit["dense_rank"] == dense_order.index(hit["chunk_id"]) + 1  # the store's own ranking
        expected = 0.5 / (RRF_K + hit["dense_rank"]) + (
            0.5 / (RRF_K + hit["lexical_rank"]) if hit["lexical_rank"] else 0.0
        )
        assert hit["score"] == pytest.approx(expected, abs=1e-9)
    by_source = {hit["source"]: hit for hit in fused["hits"]}
    assert by_source["notes/kerosene.md"]["lexical_rank"] == 1  # the only chunk holding the query's words
    assert fused["hits"][0]["source"] == "notes/kerosene.md"  # first lexically, so first fused unless dense last
    assert [h["lexical_rank"] for h in fused["hits"]].count(None) == len(DOCS) - 1

    lexical_only = query_json(index_dir, tiny_model_dir, "burner", "--hybrid", "z", "--hybrid-weight", "1")
    assert lexical_only["hits"][0]["source"] == "stove.txt"
    dense_only = query_json(index_dir, tiny_model_dir, "kerosene lamp", "--hybrid", "rrf", "--hybrid-weight", "0")
    assert [hit["chunk_id"] for hit in dense_only["hits"]] == dense_order

    # the instruction's content words reach the full-text side; its boilerplate does not
    steered = query_json(
        index_dir, tiny_model_dir, "which gear ?", "-i", "Focus on the passages about the backpack frame", "--hybrid"
    )
    assert {hit["source"] for hit in steered["hits"] if hit["lexical_rank"]} == {"pack.txt"}

    # filters hold on both sides
    filtered = query_json(index_dir, tiny_model_dir, "kerosene light tent", "--hybrid", "--filter", "source=tents/*")
    assert {hit["source"] for hit in filtered["hits"]} == {"tents/ridge.md", "tents/light.md"}


@pytest.mark.parametrize(
    "text", ['"unbalanced', "tent*", "NEAR(tent stove, 2)", "-tent", "tent: OR AND NOT", "?!…", "^col:x", "' OR 1=1 --"]
)
def test_fts_syntax_in_a_query_is_plain_text(cli_encoder, tiny_model_dir, tmp_path, text):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    index(docs, index_dir, tiny_model_dir)
    with Index.open(index_dir, encoder=cli_encoder) as opened:
        hits = opened.search(text, instruction='focus on "weight" * NEAR', k=3, hybrid="rrf")
        assert len(hits) == 3  # never an FTS5 syntax error; punctuation alone leaves the dense side


def test_bad_hybrid_arguments_are_refused(cli_encoder, tiny_model_dir, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    index(docs, index_dir, tiny_model_dir)
    with Index.open(index_dir, encoder=cli_encoder) as opened:
        vector = cli_encoder.encode_queries(["tent"])[0]
        for call, words in (
            (lambda: opened.search("tent", hybrid="bm25"), "not a fusion rule"),
            (lambda: opened.search("tent", hybrid="rrf", hybrid_weight=1.5), "outside 0..1"),
            (lambda: opened.search("tent", hybrid_weight=0.3), "needs hybrid search"),
            (lambda: opened.search(vector, hybrid="rrf"), "needs the query text"),
        ):
            with pytest.raises(BadInputError, match=words):
                call()
    result = runner.invoke(
        app, ["query", "tent", "--hybrid", "--hybrid-weight", "2", "--index-dir", str(index_dir), "--device", "cpu"]
    )
    assert result.exit_code == 2


def test_index_built_before_fulltext_is_migrated_by_the_next_run(cli_encoder, tiny_model_dir, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    index(docs, index_dir, tiny_model_dir, "--store", "qdrant")
    drop_fulltext(index_dir)

    refused = runner.invoke(
        app, ["query", "tent", "--hybrid", "--index-dir", str(index_dir), "--model", str(tiny_model_dir)]
    )
    assert refused.exit_code == 4, refused.output
    assert f"instemb-rag index {docs.resolve()} --index-dir {index_dir}" in " ".join(refused.output.split())
    assert query_json(index_dir, tiny_model_dir, "tent")["hits"]  # dense search is untouched

    # killed in the middle of adding it: nothing changed, the next run adds it
    code, output = index_subprocess(docs, index_dir, tiny_model_dir, "fulltext_built:1")
    assert code == -signal.SIGKILL, output
    with Index.open(index_dir, encoder=cli_encoder) as opened, pytest.raises(IndexFolderError, match="full-text"):
        opened.search("tent", hybrid="rrf")

    migrated = index(docs, index_dir, tiny_model_dir)
    assert "full-text index added over the 5 stored chunks" in " ".join(migrated.output.split())
    assert "files embedded (new or changed) │ 0" in migrated.output  # nothing was re-embedded
    fulltext_matches_chunks(index_dir)
    assert query_json(index_dir, tiny_model_dir, "kerosene", "--hybrid")["hits"][0]["source"] == "notes/kerosene.md"
    again = index(docs, index_dir, tiny_model_dir)
    assert "full-text index added" not in again.output


def test_fulltext_follows_changes_and_deletes(cli_encoder, tiny_model_dir, tmp_path):
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    index(docs, index_dir, tiny_model_dir)
    (docs / "stove.txt").write_text("the stove is heavy . paraffin burner .")
    (docs / "notes" / "kerosene.md").unlink()
    (docs / "new.txt").write_text("a kerosene heater for the cold tent .")
    index(docs, index_dir, tiny_model_dir)
    fulltext_matches_chunks(index_dir)
    with Index.open(index_dir, encoder=cli_encoder) as opened:
        hits = opened.search("kerosene paraffin gas", k=10, hybrid="rrf", hybrid_weight=1.0)
        matched = {hit.source for hit in hits if hit.lexical_rank is not None}
    assert matched == {"stove.txt", "new.txt"}  # the deleted file's words and the stove's old "gas" are gone


def test_rrf_and_z_agree_with_their_formulas():
    from instemb_rag.index.fusion import fuse

    dense = np.array([0.9, 0.8, 0.1, 0.5])
    lexical = np.array([0.0, 2.0, 5.0, 1.0])
    rrf = fuse(dense, lexical, "rrf", 0.5, depth=2)
    # dense top-2: 0, 1; lexical top-2: 2, 1; chunk 3 is in neither side's depth
    assert set(rrf.order.tolist()) == {0, 1, 2}
    assert rrf.order[0] == 1  # second on both sides beats first on one
    assert rrf.dense_ranks[0] == 2 and rrf.lexical_ranks[0] == 2
    assert rrf.scores[0] == pytest.approx(0.5 / (RRF_K + 2) * 2)
    z = fuse(dense, lexical, "z", 1.0)
    assert z.order.tolist() == [2, 1, 3, 0]  # lexical only
    z = fuse(dense, lexical, "z", 0.0)
    assert z.order.tolist() == [0, 1, 3, 2]  # dense only
    assert z.lexical_ranks[0] is None  # no word matched chunk 0


def index_subprocess(docs: Path, index_dir: Path, model_dir: Path, crash_at: str):
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), INSTEMB_CRASH_AT=crash_at)
    command = [sys.executable, "-m", "instemb_rag.cli", *index_cli_args(docs, index_dir, model_dir)]
    done = subprocess.run(command, env=env, capture_output=True, timeout=300)
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


@pytest.mark.parametrize(
    ("query", "instruction", "expected"),
    [
        (
            "light tent",
            "Focus on the passage that explains the packed weight",
            '"light" OR "tent" OR "packed" OR "weight"',
        ),
        ('say "hi" NEAR(x) *', None, '"say" OR "hi" OR "near" OR "x"'),
        ("tent", "Find documents relevant to this query.", '"tent"'),
        ("-- ?? !!", "", None),
        ("Café", None, '"café"'),
    ],
)
def test_match_expression_quotes_words_and_drops_boilerplate(query, instruction, expected):
    from instemb_rag.index.fulltext import match_expression

    assert match_expression(query, instruction) == expected
    assert match_expression("tent", "focus on weight", "none") == '"tent"'
    assert match_expression("tent", "focus on weight", "all") == '"tent" OR "focus" OR "weight"'
