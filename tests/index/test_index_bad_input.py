"""Bad input through the CLI: specific messages, exit codes, and nothing lost from the index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.index import EXIT_BAD_INPUT, EXIT_BUSY, EXIT_INDEX_FOLDER
from instemb_rag.index.catalog import Catalog
from instemb_rag.index.indexer import hold_index_lock

runner = CliRunner()


def cli(*args: str):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture()
def indexed(tiny_model_dir, tmp_path):
    """A small good corpus indexed once; returns (docs, index_dir, model args)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tent.md").write_text("the tent is durable nylon . good in rain .")
    (docs / "stove.txt").write_text("the stove is light . packed size 10 cm .")
    index_dir = tmp_path / "index"
    model = ["--model", str(tiny_model_dir), "--device", "cpu"]
    code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--no-progress", *model)
    assert code == 0, output
    return docs, index_dir, model


def chunk_sources(index_dir: Path) -> list[str]:
    catalog = Catalog.open(index_dir)
    try:
        return catalog.sources()
    finally:
        catalog.close()


def test_empty_folder_is_refused_and_index_kept(indexed, tmp_path):
    _, index_dir, model = indexed
    empty = tmp_path / "empty"
    empty.mkdir()
    code, output = cli("index", str(empty), "--index-dir", str(index_dir), "--no-progress", *model)
    assert code == EXIT_BAD_INPUT
    assert "No indexable files" in output and "it is empty" in output
    assert chunk_sources(index_dir) == ["stove.txt", "tent.md"]


def test_missing_folder_is_refused(tiny_model_dir, tmp_path):
    code, output = cli(
        "index",
        str(tmp_path / "nope"),
        "--index-dir",
        str(tmp_path / "i"),
        "--model",
        str(tiny_model_dir),
        "--device",
        "cpu",
    )
    assert code == EXIT_BAD_INPUT and "does not exist" in output


def test_binary_non_utf8_huge_and_unsupported_files_are_skipped_with_reasons(indexed):
    docs, index_dir, model = indexed
    (docs / "image.txt").write_bytes(b"\x89PNG\x00\x00\x01binary")
    (docs / "latin.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (docs / "huge.txt").write_text("tent " * 300_000)  # ~1.5 MB
    (docs / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    (docs / "broken.pdf").write_bytes(b"this is not a pdf")
    code, output = cli(
        "index", str(docs), "--index-dir", str(index_dir), "--no-progress", "--max-file-size", "1", *model
    )
    assert code == 0, output
    assert "image.txt: binary file" in output
    assert "latin.md: not UTF-8 text (invalid byte 0xe9 at offset 3)" in output
    assert "huge.txt: too large" in output and "--max-file-size" in output
    assert "photo.jpg: unsupported type '.jpg'" in output
    assert "broken.pdf: not a PDF" in output
    assert chunk_sources(index_dir) == ["stove.txt", "tent.md"]


def test_file_that_turns_binary_loses_its_stale_chunks(indexed):
    docs, index_dir, model = indexed
    (docs / "stove.txt").write_bytes(b"\x00\x00")
    code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--no-progress", *model)
    assert code == 0 and "stove.txt: binary file" in output
    assert chunk_sources(index_dir) == ["tent.md"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions as non-root")
def test_unreadable_file_keeps_its_previous_chunks(indexed):
    docs, index_dir, model = indexed
    (docs / "stove.txt").write_text("changed but unreadable")
    (docs / "stove.txt").chmod(0)
    try:
        code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--no-progress", *model)
    finally:
        (docs / "stove.txt").chmod(0o644)
    assert code == 0 and "stove.txt: unreadable" in output and "previous chunks kept" in output
    assert chunk_sources(index_dir) == ["stove.txt", "tent.md"]


def test_symlink_loop_is_reported_not_followed_forever(indexed):
    docs, index_dir, model = indexed
    (docs / "sub").mkdir()
    (docs / "sub" / "pack.txt").write_text("the backpack strap is durable .")
    os.symlink(docs, docs / "sub" / "loop")
    os.symlink(docs / "self-link.txt", docs / "self-link.txt")  # a file symlink pointing at itself
    code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--no-progress", *model)
    assert code == 0, output
    assert "sub/loop: symlink loop" in output
    assert "self-link.txt: cannot stat" in output
    assert chunk_sources(index_dir) == ["stove.txt", "sub/pack.txt", "tent.md"]


def test_empty_query_and_unknown_filter_are_refused(indexed):  # a blank instruction is none: test_shared_rules
    _, index_dir, model = indexed
    code, output = cli("query", "   ", "--index-dir", str(index_dir), *model)
    assert code == EXIT_BAD_INPUT and "query is empty" in output
    code, output = cli("query", "tent", "--filter", "colour=red", "--index-dir", str(index_dir), *model)
    assert code == EXIT_BAD_INPUT and "filterable keys: source" in output


def test_query_without_an_index_says_how_to_build_one(tiny_model_dir, tmp_path):
    code, output = cli("query", "tent", "--index-dir", str(tmp_path / "none"), "--model", str(tiny_model_dir))
    assert code == EXIT_INDEX_FOLDER and "instemb-rag index PATH" in output


def test_second_index_run_is_refused_while_the_lock_is_held(indexed):
    docs, index_dir, model = indexed
    lock = hold_index_lock(index_dir, 0)  # stands in for a running `index`
    try:
        code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--no-progress", *model)
        assert code == EXIT_BUSY and "--wait SECONDS" in output
        # A query during the run still answers from the last committed state.
        code, output = cli("query", "durable tent", "--index-dir", str(index_dir), "--json", *model)
        assert code == 0 and '"source": "tent.md"' in output
    finally:
        lock.release()
    assert chunk_sources(index_dir) == ["stove.txt", "tent.md"]


def test_query_json_and_table_output(indexed):
    _, index_dir, model = indexed
    import json

    result = runner.invoke(app, ["query", "durable tent", "-k", "1", "--json", "--index-dir", str(index_dir), *model])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert len(payload["hits"]) == 1 and set(payload["hits"][0]) >= {"score", "source", "position", "text"}
    code, output = cli("query", "durable tent", "-i", "focus on rain", "--index-dir", str(index_dir), *model)
    assert code == 0 and "instruction: 'focus on rain'" in output and "tent.md #0" in output
