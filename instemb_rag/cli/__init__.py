"""The `instemb-rag` command line: the typer app, one module per sub-command.

    train.py, eval.py (+ eval_facets.py), compare.py, index.py, query.py, serve.py, demo.py, teachers.py
    common.py   the one exit-code table, error reporting and the options several commands share

Each command module exposes ``register(app)`` and imports its heavy parts (torch, faiss) inside
the command, so `instemb-rag --help` lists every command without loading them.
"""

from __future__ import annotations

import importlib

import typer

__all__ = ["COMMAND_MODULES", "app", "register_all"]

# Add a module name here when you add a command module.
COMMAND_MODULES: list[str] = ["train", "eval", "compare", "index", "query", "serve", "demo", "teachers", "compose"]

app = typer.Typer(
    name="instemb-rag",
    help="Instruction-following retrieval: index documents once, query with an instruction.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    # click's plain help, not typer's rich panels: rich squeezes the option-name column at 80 columns,
    # the width of every pipe, CI log and editor panel, and cuts names (`--qdrant-collect…`); click
    # puts a long name on its own line and wraps only the help text. Help texts are read verbatim
    # (no rich markup), so a `[...]` in one is printed, not swallowed.
    rich_markup_mode=None,
)


def register_all(app) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(app)


register_all(app)
