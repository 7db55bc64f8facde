"""Rich output for the index, query and demo commands: progress bar, summary, result tables."""

from __future__ import annotations

from rich.console import Console
from rich.progress import ProgressColumn
from rich.table import Table
from rich.text import Text

from ..progress import counting_progress
from .indexer import IndexReport
from .search import SearchHit

SNIPPET_CHARS = 160


class ChunkRateColumn(ProgressColumn):
    def render(self, task) -> Text:
        # The run's average, not rich's speed over its last updates: chunks arrive in commit
        # groups, and a small folder's one group would read as hundreds of chunks/s at the instant
        # it landed, next to a summary saying 0.8.
        elapsed = task.finished_time if task.finished else task.elapsed
        speed = task.completed / elapsed if elapsed and task.completed else None
        return Text(f"{speed:.1f} chunks/s" if speed else "– chunks/s", style="cyan")


class RichChunkProgress:
    """The indexer's progress callbacks drawn as one rich bar (chunks, chunks/s, ETA)."""

    def __init__(self, console: Console, enabled: bool = True):
        self.progress = counting_progress("embedding", ChunkRateColumn(), enabled=enabled, console=console)
        self.task = None

    def __enter__(self) -> RichChunkProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def start(self, total_chunks: int | None) -> None:
        if total_chunks == 0:  # every file unchanged or skipped: said, not drawn as `0/0 – chunks/s`
            if not self.progress.disable:
                self.progress.console.print("embedding: nothing to embed (every file is unchanged or skipped)")
            return
        self.task = self.progress.add_task("embed", total=total_chunks)

    def advance(self, chunks: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, chunks)


def print_summary(console: Console, report: IndexReport, index_dir) -> None:
    table = Table(title=Text(f"Index {index_dir}"), show_header=False)
    # found = embedded + unchanged + skipped: every file met, of any type, lands in one of the three
    table.add_row("files found", str(report.files_found))
    table.add_row("files embedded (new or changed)", str(len(report.indexed)))
    table.add_row("files unchanged", str(report.unchanged))
    table.add_row("files skipped", str(report.files_skipped))
    table.add_row("files removed (deleted)", str(len(report.removed)))
    table.add_row("chunks added / in index", f"{report.chunks_added} / {report.chunks_total}")
    rate = report.chunks_added / report.seconds if report.seconds else 0.0
    table.add_row("time", f"{report.seconds:.1f} s ({rate:.1f} chunks/s)")
    console.print(table)
    if report.repaired:
        console.print(Text(report.repaired, style="yellow"))
    if report.fulltext_added is not None:
        console.print(
            Text(f"full-text index added over the {report.fulltext_added} stored chunks: --hybrid works now", "yellow")
        )
    for item in report.skipped:
        kept = " (previous chunks kept)" if item.keep_previous else ""
        console.print(Text.assemble(("skipped", "yellow"), f" {item.path}: {item.reason}{kept}"))


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def hits_table(hits: list[SearchHit], title: str, explanations: list[dict] | None = None) -> Table:
    """Ranked hits; the query, sources and document text are shown verbatim (``Text``), never
    read as rich markup: a markdown ``[link](url)`` keeps its words, a stray ``[/b]`` cannot raise.
    ``explanations`` (``Index.explain``) adds what each score is made of: each space's cosine, the
    LLM weight and the combined score (two-space models), the plain score, the instruction's
    contribution, the strength and the combined score (instruction-effect models), or with hybrid
    search on a model of one space the dense cosine and the bm25 score it fuses."""
    table = Table(title=Text(title), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    hybrid = any(hit.dense_rank is not None or hit.lexical_rank is not None for hit in hits)
    if hybrid:  # each side's rank beside the fused score ("–": beyond that side's candidates)
        table.add_column("dense #", justify="right")
        table.add_column("text #", justify="right")
    keys = explained_columns(explanations)
    for _, heading in keys:
        table.add_column(heading, justify="right")
    table.add_column("source")
    table.add_column("snippet")
    for rank, hit in enumerate(hits, start=1):
        where = f"{hit.source} #{hit.position}" + (f" p.{hit.extra['page']}" if "page" in hit.extra else "")
        sides = [_rank(hit.dense_rank), _rank(hit.lexical_rank)] if hybrid else []
        parts = [_value(explanations[rank - 1].get(key)) for key, _ in keys]
        table.add_row(str(rank), f"{hit.score:.4f}", *sides, *parts, Text(where), Text(snippet(hit.text)))
    return table


TWO_SPACE_COLUMNS = (
    ("llm", "LLM cos"),
    ("tower", "tower cos"),
    ("llm_weight", "LLM weight"),
    ("weighted", "weighted"),
)
EFFECT_COLUMNS = (  # an instruction-effect model (encoder/composed/effect.py's explain)
    ("plain", "plain cos"),
    ("instruction", "instruction"),
    ("instruction_strength", "strength"),
    ("combined", "combined"),
)


def explained_columns(explanations: list[dict] | None) -> list[tuple[str, str]]:
    """(key, heading) of the explanation columns: none, the two spaces' four, the instruction
    effect's four, or a model of one space's: the two sides of a hybrid score (its cosine, its bm25),
    none for a dense score (the score column is its one cosine already)."""
    if not explanations:
        return []
    if "llm" in explanations[0]:
        return list(TWO_SPACE_COLUMNS)
    if "plain" in explanations[0]:
        return list(EFFECT_COLUMNS)
    return [("cosine", "cosine"), ("bm25", "bm25")] if "bm25" in explanations[0] else []


def _value(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _rank(value: int | None) -> str:
    return "–" if value is None else str(value)
