"""The index summary's file counts add up (issue 55): every file met, of any type, is embedded,
unchanged or skipped, so files found = embedded + unchanged + skipped on every run."""

from __future__ import annotations

import os
import re

from typer.testing import CliRunner

from instemb_rag.cli import app

runner = CliRunner()
ROWS = ("files found", "files embedded (new or changed)", "files unchanged", "files skipped")


def summary_counts(*args: str) -> dict[str, int]:
    result = runner.invoke(app, ["index", *args, "--no-progress"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    counts = {}
    for label in ROWS:
        found = re.search(rf"{re.escape(label)}\s*│?\s*(\d+)\b", result.output)
        assert found, (label, result.output)
        counts[label] = int(found.group(1))
    return counts


def test_found_is_embedded_plus_unchanged_plus_skipped(tiny_model_dir, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tent.md").write_text("the tent is durable nylon . good in rain .")
    (docs / "stove.md").write_text("the stove is light . packed size 10 cm .")
    (docs / "photo.jpg").write_bytes(b"\xff\xd8\xff")  # unsupported types
    (docs / "notes.docx").write_bytes(b"PK\x03\x04")
    (docs / "broken.txt").write_bytes(b"a\x00b")  # supported types, unusable content
    (docs / "broken.pdf").write_text("not a pdf")
    (docs / "loop").mkdir()
    os.symlink("..", docs / "loop" / "up")  # a folder reported as skipped: no file
    args = (str(docs), "--index-dir", str(tmp_path / "index"), "--model", str(tiny_model_dir), "--device", "cpu")

    first = summary_counts(*args)
    assert first == dict(zip(ROWS, (6, 2, 0, 4))), first

    (docs / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    second = summary_counts(*args)
    assert second == dict(zip(ROWS, (7, 0, 2, 5))), second
