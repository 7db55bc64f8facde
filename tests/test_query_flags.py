"""The lean client's option table (instemb_rag/cli/query_flags.py) is the typer command's options as
data, written by query_flags_source.py: stale, this fails (issue 70 item 1: one definition of the
options). And the lean parser reads a command line as the typer command does, or hands it over."""

from __future__ import annotations

import pytest

from instemb_rag.cli import query_flags
from instemb_rag.cli.entry import error_line, parse_query
from instemb_rag.cli.query_flags_source import TABLE, table_source


def test_the_option_table_is_the_typer_commands():
    assert TABLE.read_text(encoding="utf-8") == table_source(), (
        "instemb_rag/cli/query_flags.py is stale: `python -m instemb_rag.cli.query_flags_source` writes it again"
    )


@pytest.fixture(autouse=True)
def no_option_set_by_the_environment(monkeypatch):
    for spec in query_flags.OPTIONS.values():
        if spec["envvar"]:
            monkeypatch.delenv(spec["envvar"], raising=False)  # the tests set INSTEMB_NO_DAEMON=1


def parse(*args: str):
    return parse_query(list(args), query_flags.ARGUMENT, query_flags.OPTIONS)


def test_every_option_a_warm_query_answers_by_is_read():
    values = parse(
        "light tent",
        "-i",
        "focus on weight",
        "-k3",
        "--index-dir=idx",
        "--filter",
        "source=tents/*",
        "--filter",
        "source=b",
        "--hybrid",
        "--hybrid-weight",
        "0.25",
        "--no-rerank",
        "--rerank-top",
        "4",
        "--llm-weight",
        "1",
        "--explain",
        "--json",
        "-m",
        "model-dir",
    )
    assert values == {
        "text": "light tent",
        "instruction": "focus on weight",
        "k": 3,
        "index_dir": "idx",
        "filters": ["source=tents/*", "source=b"],
        "hybrid": "z",  # a bare --hybrid: the default rule, as HybridOptionalValueCommand reads it
        "hybrid_weight": 0.25,
        "rerank": False,
        "rerank_top": 4,
        "llm_weight": 1.0,
        "instruction_strength": None,
        "explain": True,
        "as_json": True,
        "model": "model-dir",
        "device": "auto",
    }


def test_defaults_and_the_last_of_a_repeated_option():
    values = parse("-k", "2", "tent", "-k", "7", "--hybrid", "rrf")
    assert values["text"] == "tent" and values["k"] == 7 and values["hybrid"] == "rrf"
    assert values["index_dir"] == ".instemb" and values["instruction"] is None and values["filters"] is None


@pytest.mark.parametrize(
    "args",
    [
        [],  # a missing argument
        ["a", "b"],  # an extra one
        ["tent", "--help"],
        ["tent", "-k", "0"],  # out of range: typer's message
        ["tent", "-k", "two"],
        ["tent", "-k", "+3"],  # a form the parser does not read: typer's to judge
        ["tent", "-k=3"],
        ["tent", "--hybrid-weight", "2"],
        ["tent", "--hybrid-weight", "1e-1"],
        ["tent", "--llm-weight", "nan"],
        ["tent", "--hybrid=Z"],
        ["tent", "--index-dir="],
        ["tent", "-k"],  # no value
        ["tent", "--json=1"],
        ["tent", "--nope"],
        ["tent", "-x"],
        ["tent", "-i", "-k"],  # a value that looks like an option
        ["--", "-tent"],
        ["-"],
        ["tent", "--no-daemon"],  # only the in-process path honours these
        ["tent", "--precision", "fp32"],
        ["tent", "--compile"],
        ["tent", "--strict-precision"],
        ["tent", "--qdrant-url", "http://localhost:6333"],
        ["tent", "--device", "cpu"],  # a callback checks it
    ],
)
def test_anything_else_is_handed_over(args):
    assert parse(*args) is None


@pytest.mark.parametrize("name", ["INSTEMB_NO_DAEMON", "QDRANT_API_KEY"])
def test_an_option_set_by_its_environment_variable_is_handed_over(name, monkeypatch):
    assert parse("tent") is not None
    monkeypatch.setenv(name, "1")
    assert parse("tent") is None


def test_the_error_line_is_the_typer_apps():
    import typer

    assert error_line("No index in x", color=True) == typer.style("error: No index in x", fg=typer.colors.RED)
    assert error_line("No index in x", color=False) == "error: No index in x"
