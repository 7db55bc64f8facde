"""Messages printed through rich keep their square brackets.

rich reads ``[word]`` as markup: ``pip install 'instemb-rag[serve]'`` printed unescaped loses its
extra, a markdown ``[link](url)`` in a document loses its words, and a stray ``[/b]`` raises
MarkupError (exit 1 with a traceback). Each message is rendered the way the CLI renders it.
"""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.cli.common import ExitCode, say
from instemb_rag.index.stores.faiss import FaissStore
from instemb_rag.index.stores.faiss_gpu import GPU_EXTRA_HINT, faiss_gpu_available

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, " ".join(result.output.split())


def test_serve_install_hint_keeps_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # the serve extra is not installed
    code, output = cli("serve")
    assert code == ExitCode.BAD_INPUT, output
    assert "fastapi is not installed" in output
    assert "pip install 'instemb-rag[serve]'" in output, output


def test_ray_install_hint_keeps_its_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # the ray extra is not installed
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("a tent")
    code, output = cli("index", str(docs), "--index-dir", str(tmp_path / "index"), "--ray")
    assert code == ExitCode.BAD_INPUT, output
    assert "pip install 'instemb-rag[ray]'" in output, output


@pytest.mark.skipif(faiss_gpu_available(), reason="this faiss has GPU support: no install hint to print")
def test_gpu_install_hint_keeps_its_extras(tmp_path):
    """The note `query` prints (cli/query.py: say(console, "note", ...)) when the encoder
    runs on CUDA but faiss cannot follow it there."""
    note = FaissStore(tmp_path, None, "flat", 8).place_on_gpu(0)
    assert note and GPU_EXTRA_HINT in note
    buffer = io.StringIO()
    say(Console(file=buffer, width=400), "note", note)
    printed = buffer.getvalue()
    assert 'pip install "instemb-rag[gpu]" (CUDA 12) or "instemb-rag[gpu-cu13]" (CUDA 13)' in printed, printed


def test_documents_and_queries_with_brackets_print_verbatim(tiny_model_dir, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "manual.md").write_text("Pitch the tent as in [the manual](http://example.org); the [/b] tag is text.")
    (docs / "stove.md").write_text("The stove packs to 10 cm.")
    index_dir = tmp_path / "index"
    model = ["--model", str(tiny_model_dir), "--device", "cpu"]
    code, output = cli("index", str(docs), "--index-dir", str(index_dir), "--no-progress", *model)
    assert code == 0, output
    code, output = cli("query", "tent [manual]", "-k", "2", "--index-dir", str(index_dir), *model)
    assert code == 0, output
    assert "[the manual](http://example.org)" in output and "the [/b] tag" in output, output
    assert "'tent [manual]'" in output, output  # the table title: the query as typed


def test_error_texts_with_markup_like_brackets_do_not_raise():
    buffer = io.StringIO()
    say(Console(file=buffer, width=400), "error", "records.jsonl line 2: field [/x] is unknown", "red")
    assert "field [/x] is unknown" in buffer.getvalue()
