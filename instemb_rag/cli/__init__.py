"""The `instemb-rag` command line.

    entry.py      the console script (and `python -m instemb_rag.cli`): a warm `query` answered by
                  the resident query process without typer, pydantic or rich; every other command
                  line handed to the typer app
    typer_app.py  the typer app: every command, one module per sub-command (query.py, index.py, ...)
    query_core.py what `query` does without typer (its request, its output), for both paths
    query_flags.py  `query`'s options as data for the lean client, generated from the typer command
                  (query_flags_source.py; tests/test_query_flags.py fails when it is stale)

This face imports nothing: `app` (and the app's tables) load the typer app on first use, so the
lean client's start does not pay for it.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .entry import main
    from .typer_app import COMMAND_MODULES, HELP_GROUPS, app, register_all

_HOMES = {
    "COMMAND_MODULES": ".typer_app",
    "HELP_GROUPS": ".typer_app",
    "app": ".typer_app",
    "register_all": ".typer_app",
    "main": ".entry",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOMES[name], __name__), name)


__all__ = ["COMMAND_MODULES", "HELP_GROUPS", "app", "main", "register_all"]
