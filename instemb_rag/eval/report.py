"""Rich tables for evaluation results (the CLI and the ablation script share them)."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text


def results_table(results: list[dict], title: str = "evaluation") -> Table:
    """One row per metric, the task's main metric first and bold, so that every value stays
    readable in an 80-column terminal (a single joined metrics cell was cut to '...')."""
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
        padding=(0, 1),
        show_edge=False,
        caption="n: queries / stance records / STS pairs; [..]: bootstrap 95 % interval; *: cached corpus embeddings; "
        f"{sum(result['seconds'] for result in results):.0f} s in all",
    )
    table.add_column("encoder", overflow="fold", min_width=10)
    table.add_column("task", overflow="fold", min_width=14)
    table.add_column("metric", no_wrap=True)
    for column in ("value", "n", "docs"):
        table.add_column(column, justify="right", no_wrap=True)
    for result in results:
        main = result["main_metric"]
        ordered = [main] + [name for name in result["metrics"] if name != main]
        counts = result["counts"]
        docs = str(counts.get("documents", ""))
        for position, name in enumerate(ordered):
            first = position == 0
            value = f"{result['metrics'][name]:.4f}"
            interval = result.get("intervals", {}).get(name)
            if interval:
                value += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
            table.add_row(
                Text(result["encoder"]["label"]) if first else "",  # a path: shown verbatim, not as markup
                Text(result["task"]) if first else "",
                f"[bold]{name}[/bold]" if first else name,
                f"[bold]{value}[/bold]" if first else value,
                str(counts.get("queries", counts.get("pairs", ""))) if first else "",
                (docs + ("*" if result["corpus_from_cache"] else "")) if first else "",
                end_section=position == len(ordered) - 1,
            )
    return table
