"""The `instemb-rag` command line; each sub-command lives in instemb_rag/commands/."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="instemb-rag",
    help="Instruction-following retrieval: index documents once, query with an instruction.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _register_commands() -> None:
    # Imported here so `instemb-rag --help` lists every command without loading torch.
    from .commands import register_all

    register_all(app)


_register_commands()

if __name__ == "__main__":
    app()
