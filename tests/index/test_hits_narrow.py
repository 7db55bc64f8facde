"""Hits printed where stdout is no terminal at 80 columns (a pipe, a CI log) stay readable (issue
63 item 2): one block per hit when a table would squeeze its snippet to a word per line, file names
whole, every explain number with its label; a wide console keeps the table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from helpers import index_cli_args
from rich.console import Console
from typer.testing import CliRunner

from instemb_rag.cli import app
from instemb_rag.index.display import hits_table
from instemb_rag.index.search import SearchHit

pytest.importorskip("sentence_transformers")

LONG_NAME = "tents/expedition/stormguard-4s-four-season-winter-reviews.txt"
DOCS = {
    LONG_NAME: "the tent is durable nylon . good in rain and wind . the floor and seam are good .",
    "tents/light.md": "a light tent . packed size 30 cm . weight 1 kg . a compact tent for a trip .",
    "stove.txt": "the stove is light . fuel gas burner . good for a cold night in camp .",
}
QUERY, INSTRUCTION = "which tent is durable in rain ?", "focus on durability and water"
EFFECT_HEADINGS = ("plain cos", "instruction", "strength", "combined")
runner = CliRunner()


def printed(renderable, width: int) -> str:
    """What a console that is no terminal prints at ``width`` columns."""
    stream = io.StringIO()
    Console(file=stream, width=width, force_terminal=False, color_system=None).print(renderable)
    return stream.getvalue()


def hit(source: str, rank: int) -> SearchHit:
    text = " ".join(["the tent is durable in rain and wind, with a floor that keeps water out."] * 4)
    return SearchHit(score=0.5 - rank / 100, source=source, position=rank, text=text, chunk_id=rank, extra={})


def effect_rows(count: int) -> list[dict]:
    return [{"plain": 0.61, "instruction": 0.05, "instruction_strength": 1.0, "combined": 0.66, "score": 0.47}] * count


def longest_word_run(output: str) -> int:
    """The most consecutive lines holding one word or less: a snippet squeezed into a thin column."""
    longest = run = 0
    for line in output.splitlines():
        words = [word for word in line.replace("│", " ").replace("┃", " ").split() if word.strip("…")]
        run = run + 1 if 0 < len(words) <= 2 else 0
        longest = max(longest, run)
    return longest


def test_explain_at_80_columns_is_one_block_per_hit_with_whole_names():
    hits = [hit(LONG_NAME, 0), hit("tents/light.md", 1)]
    output = printed(hits_table(hits, f"{QUERY!r} — instruction: {INSTRUCTION!r}", effect_rows(2)), 80)
    assert all(len(line) <= 80 for line in output.splitlines())
    assert LONG_NAME in output and "…" not in output.split("\n")[3]  # the name line, whole
    for heading in EFFECT_HEADINGS:
        assert f"{heading} 0." in output or f"{heading} 1." in output, output
    assert longest_word_run(output) <= 1, output
    assert "┃" not in output  # no table squeezed into 80 columns


def test_a_wide_console_keeps_the_table_with_whole_names():
    hits = [hit(LONG_NAME, 0), hit("tents/light.md", 1)]
    output = printed(hits_table(hits, "title", effect_rows(2)), 200)
    assert "┃ # ┃" in output.replace("  ", " ") or "┃ #" in output
    assert f"{LONG_NAME} #0" in output
    for heading in EFFECT_HEADINGS:
        assert heading in output


def test_a_file_name_longer_than_the_line_is_folded_not_cut():
    name = "a/" + "very-long-folder-name/" * 5 + "notes.md"
    output = printed(hits_table([hit(name, 0)], "title"), 60)
    assert name in "".join(output.split("\n")) and "…" not in output.split("\n\n")[1].split("\n")[0]


@pytest.fixture(scope="module")
def effect_index(tiny_model_dir, tiny_st_dir, tmp_path_factory) -> Path:
    from instemb_rag.encoder.load import untrained_effect

    root = tmp_path_factory.mktemp("narrow")
    model = root / "model"
    untrained_effect(str(tiny_model_dir), str(tiny_st_dir), device="cpu", lookahead_length=2).save(model)
    for relative, text in DOCS.items():
        (root / "docs" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / relative).write_text(text)
    result = runner.invoke(app, index_cli_args(root / "docs", root / "index", model, "--chunk-overlap", "8"))
    assert result.exit_code == 0, result.output
    return root / "index"


def test_query_explain_piped_at_80_columns_reads_whole(effect_index):
    result = runner.invoke(
        app,
        ["query", QUERY, "-i", INSTRUCTION, "--index-dir", str(effect_index), "--explain", "-k", "3"],
        env={"COLUMNS": "80", "INSTEMB_NO_DAEMON": "1"},
    )
    assert result.exit_code == 0, result.output
    output = result.output
    assert all(len(line) <= 80 for line in output.splitlines()), output
    assert LONG_NAME in output and "tents/light.md" in output and "stove.txt" in output
    for heading in EFFECT_HEADINGS:
        assert heading in output
    assert "instruc…" not in output and longest_word_run(output) <= 1, output
