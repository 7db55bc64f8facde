"""Rich tables for evaluation results (the CLI and the ablation script share them)."""

from __future__ import annotations

from rich.table import Table


def results_table(results: list[dict], title: str = "evaluation") -> Table:
    table = Table(title=title)
    for column in ("encoder", "task", "main", "metrics", "queries", "docs", "cache", "s"):
        table.add_column(column, justify="right" if column in {"main", "queries", "docs", "s"} else "left")
    for result in results:
        metrics = ", ".join(f"{name}={value:.4f}" for name, value in result["metrics"].items())
        counts = result["counts"]
        table.add_row(
            result["encoder"]["label"],
            result["task"],
            f"{result['main_metric']}={result['metrics'][result['main_metric']]:.4f}",
            metrics,
            str(counts.get("queries", counts.get("pairs", ""))),
            str(counts.get("documents", "")),
            "hit" if result["corpus_from_cache"] else "",
            f"{result['seconds']:.1f}",
        )
    return table
