"""`instemb-rag compare`: paired gains of one encoder over another from two saved eval files."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import fail, say


def compare_command(
    candidate: Path = typer.Argument(..., help="The candidate's `instemb-rag eval -o` JSON file."),
    baseline: Path = typer.Argument(..., help="The baseline's JSON file: the same tasks, run with the same options."),
    seed: int = typer.Option(0, help="Seed of the paired bootstrap."),
    output: Path | None = typer.Option(None, "--output", "-o", "--json", help="Also write the rows as JSON here."),
) -> None:
    """Pair two encoders' results item by item (same queries, records, foci) and print each
    metric's gain with its 95 % paired-bootstrap interval."""
    from rich.console import Console

    from ..atomic import write_text_atomically
    from ..errors import InstEmbError
    from ..eval.compare import compare_results, read_results
    from ..eval.report import paired_gains_table

    try:
        rows, notes = compare_results(read_results(candidate), read_results(baseline), seed=seed)
    except InstEmbError as error:
        fail(error)
    console = Console()
    console.print(paired_gains_table(rows))
    for note in notes:
        say(console, "left out", note)
    if output is not None:
        import json

        document = {"candidate": str(candidate), "baseline": str(baseline), "seed": seed, "rows": rows, "notes": notes}
        write_text_atomically(output, json.dumps(document, indent=2))
        say(console, "written", output, style="green")


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
