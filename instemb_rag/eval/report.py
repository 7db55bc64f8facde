"""Rich tables for evaluation results (the CLI and the ablation script share them)."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text


def _compact_table(title: str, caption: str) -> Table:
    """The compact style every evaluation table shares: no outer edge, one space between columns."""
    return Table(
        title=title,
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
        padding=(0, 1),
        show_edge=False,
        caption=caption,
    )


def results_table(results: list[dict], title: str = "evaluation") -> Table:
    """One row per metric, the task's main metric first and bold, so that every value stays
    readable in an 80-column terminal (a single joined metrics cell was cut to '...')."""
    table = _compact_table(
        title,
        "n: queries / stance records / STS pairs; [..]: bootstrap 95 % interval; *: cached corpus embeddings; "
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


def facet_comparison_table(comparisons: list[dict]) -> Table:
    """The first embedder minus each other one on every facet-groups metric: the gain and its
    95 % paired-bootstrap interval (whole groups resampled); '>0' marks a gain whose whole
    interval lies above zero."""
    table = _compact_table(
        "facet groups: paired gains",
        "gain = candidate - baseline, paired per item, [..]: 95 % interval over resampled groups; >0: interval above 0",
    )
    table.add_column("candidate", overflow="fold", min_width=10)
    table.add_column("baseline", overflow="fold", min_width=10)
    table.add_column("metric", no_wrap=True)
    table.add_column("gain", justify="right", no_wrap=True)
    for comparison in comparisons:
        gains = comparison["gains"]
        for position, (name, gain) in enumerate(gains.items()):
            low, high = gain["interval"]
            mark = " >0" if gain["above_zero"] else ""
            table.add_row(
                Text(comparison["candidate"]) if position == 0 else "",
                Text(comparison["baseline"]) if position == 0 else "",
                name,
                f"{gain['gain']:+.3f} [{low:+.3f}, {high:+.3f}]{mark}",
                end_section=position == len(gains) - 1,
            )
    return table


def paired_gains_table(rows: list[dict]) -> Table:
    """``instemb-rag compare``: each task and metric, both means and the paired gain with its 95 %
    interval; '>0' / '<0' mark an interval wholly above / below zero."""
    table = _compact_table(
        "paired gains (candidate - baseline)",
        "paired per item, [..]: 95 % bootstrap interval; >0 / <0: the whole interval above / below 0",
    )
    table.add_column("task", overflow="fold", min_width=8)
    table.add_column("metric", overflow="fold", min_width=12)
    for name in ("n", "candidate", "baseline", "gain"):
        table.add_column(name, justify="right", no_wrap=True)
    for position, row in enumerate(rows):
        low, high = row["interval"]
        mark = " >0" if low > 0 else (" <0" if high < 0 else "")
        new_task = position == 0 or rows[position - 1]["task"] != row["task"]
        table.add_row(
            Text(row["task"]) if new_task else "",
            row["metric"],
            str(row["items"]),
            f"{row['candidate']:.3f}",
            f"{row['baseline']:.3f}",
            f"{row['gain']:+.3f} [{low:+.3f}, {high:+.3f}]{mark}",
            end_section=position + 1 < len(rows) and rows[position + 1]["task"] != row["task"],
        )
    return table


def facet_split_table(details: list[dict]) -> Table:
    """first_in_group of each embedder (columns) per domain and per group kind (rows)."""
    table = _compact_table("facet groups: first_in_group by domain and kind", "n: instructions (groups)")
    table.add_column("split", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for detail in details:
        table.add_column(Text(detail["label"]), justify="right", overflow="fold")
    first = details[0]
    for section, key in (("domain", "by_domain"), ("kind", "by_kind")):
        names = list(first[key])
        for position, name in enumerate(names):
            row = first[key][name]
            table.add_row(
                Text(f"{section} {name}"),
                f"{row['instructions']} ({row['groups']})",
                *(f"{detail[key][name]['first_in_group']:.3f}" for detail in details),
                end_section=position == len(names) - 1,
            )
    return table
