"""A run with nothing to embed says so instead of drawing an empty bar (`0/0 – chunks/s -:--:--`)."""

from __future__ import annotations

import io

from rich.console import Console
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index.display import RichChunkProgress


def test_an_empty_run_says_nothing_to_embed_on_a_terminal():
    buffer = io.StringIO()
    with RichChunkProgress(Console(file=buffer, force_terminal=True, width=100)) as bar:
        bar.start(0)
        bar.advance(0)  # a file that changed into something unusable: committed, no chunk
    drawn = buffer.getvalue()
    assert "nothing to embed" in drawn and "0/0" not in drawn and "chunks/s" not in drawn, drawn


def test_without_the_bar_nothing_is_said():
    buffer = io.StringIO()
    with RichChunkProgress(Console(file=buffer, force_terminal=True, width=100), enabled=False) as bar:
        bar.start(0)
    assert buffer.getvalue() == ""


def test_a_second_index_run_of_unchanged_files_says_nothing_to_embed(tiny_model_dir, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tent.md").write_text("the tent is durable nylon . good in rain .")
    args = ["index", str(docs), "--index-dir", str(tmp_path / "index"), "--model", str(tiny_model_dir)]
    runner = CliRunner()
    first = runner.invoke(app, [*args, "--device", "cpu"], env={"COLUMNS": "200"})
    assert first.exit_code == 0 and "nothing to embed" not in first.output, first.output
    second = runner.invoke(app, [*args, "--device", "cpu"], env={"COLUMNS": "200"})
    assert second.exit_code == 0 and "nothing to embed" in second.output, second.output
