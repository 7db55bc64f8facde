"""Rich output for the index, query and demo commands: progress bar, summary, result tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import ProgressColumn
from rich.table import Table
from rich.text import Text

from ..knobs import INSTRUCTION_STRENGTH, LLM_WEIGHT
from ..progress import counting_progress

if TYPE_CHECKING:  # types only: the query client draws hits without loading the indexer or faiss
    from .hits import SearchHit
    from .indexer import IndexReport

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

    def plan(self, plan, estimate) -> None:
        """The plan (index/plan.py), said before the work: printed even without the bar."""
        console = self.progress.console
        console.print(Text("plan:", style="bold"))
        for line in plan.lines():
            console.print(Text("  " + line))
        if estimate is not None:
            console.print(Text("  " + estimate.line(), style="cyan"))

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
    if report.nothing_selected:  # nothing was read: the notes and the reason, no table of zeros
        for note in [*report.warnings, *report.notes]:
            console.print(Text.assemble(("note", "yellow"), f" {note}"))
        console.print(Text(report.nothing_selected, style="yellow"))
        return
    table = Table(title=Text(f"Index {index_dir}"), show_header=False)
    # found = embedded + unchanged + skipped: every file met, of any type, lands in one of the three
    table.add_row("files found", str(report.files_found))
    table.add_row("files embedded (new or changed)", str(len(report.indexed)))
    table.add_row("files unchanged", str(report.unchanged))
    table.add_row("files skipped", str(report.files_skipped))
    if report.data_files_without_text:
        table.add_row("  data files without text", str(report.data_files_without_text))
    table.add_row("files removed from the index", str(len(report.removed)))
    table.add_row("files left out (see the plan)", str(report.files_left_out))
    table.add_row("chunks added / in index", f"{report.chunks_added} / {report.chunks_total}")
    if report.plan.kept_from_interrupted:
        table.add_row("chunks kept (interrupted run)", f"{report.plan.kept_from_interrupted:,}")
    rate = report.chunks_added / report.seconds if report.seconds else 0.0
    table.add_row("time", f"{report.seconds:.1f} s ({rate:.2f} chunks/s)")
    if report.embedding_seconds:
        embedded_rate = report.embedded_chunks / report.embedding_seconds
        table.add_row(
            "embedding",
            f"{report.embedded_chunks} chunks in {report.embedding_seconds:.1f} s ({embedded_rate:.2f} chunks/s)",
        )
    console.print(table)
    for note in [*report.warnings, *report.notes]:
        console.print(Text.assemble(("note", "yellow"), f" {note}"))
    if report.estimate_verdict:
        console.print(Text(report.estimate_verdict, style="yellow"))
    if report.interrupted:
        console.print(
            Text(
                f"interrupted: the {len(report.indexed)} files committed are in the index, and every finished batch of "
                "the others is kept; run the same command again to go on from there.",
                style="yellow",
            )
        )
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


def hits_table(hits: list[SearchHit], title: str, explanations: list[dict] | None = None) -> HitsView:
    """Ranked hits, printed as a table where the console is wide enough and as one block per hit
    where it is not (a pipe or a CI log: 80 columns). The query, sources and document text are shown
    verbatim (``Text``), never read as rich markup: a markdown ``[link](url)`` keeps its words, a
    stray ``[/b]`` cannot raise. ``explanations`` (``Index.explain``) adds what each score is made
    of: each space's cosine, the LLM weight and the combined score (two-space models), the plain
    score, the instruction's contribution, the strength and the combined score (instruction-effect
    models), or with hybrid search on a model of one space the dense cosine and the bm25 score it fuses."""
    return HitsView(hits, title, explanations)


# The least room a table leaves the snippet column; narrower than that, each hit is a block.
MIN_SNIPPET_WIDTH = 36
BLOCK_INDENT = "    "


class HitsView:
    """A rich renderable: the hits as a table or, at a narrow width, one block per hit. File names
    are whole in both (a table's source column is never shrunk; a block folds a name longer than
    the line instead of cutting it)."""

    def __init__(self, hits: list[SearchHit], title: str, explanations: list[dict] | None = None):
        self.hits = hits
        self.title = title
        self.explanations = explanations
        self.hybrid = any(hit.dense_rank is not None or hit.lexical_rank is not None for hit in hits)
        self.keys = explained_columns(explanations)

    def __rich_console__(self, console: Console, options):
        rows = [self.numbers(rank, hit) for rank, hit in enumerate(self.hits, start=1)]
        headings = ["#", *(heading for heading, _ in rows[0][1:])] if rows else ["#", "score"]
        widths = [max([len(headings[n]), *(len(row[n][1]) for row in rows)]) for n in range(len(headings))]
        source_width = max([len("source"), *(len(self.where(hit)) for hit in self.hits)])
        # rich's default box: one rule per column edge and a space either side of each cell.
        fixed = sum(width + 3 for width in [*widths, source_width]) + 3 + 1
        if fixed + MIN_SNIPPET_WIDTH <= options.max_width:
            yield self.table(headings, rows, source_width)
        else:
            yield from self.blocks(rows, options.max_width)

    def numbers(self, rank: int, hit: SearchHit) -> list[tuple[str, str]]:
        """(heading, value) of a hit's numbers: its rank, score, each side's rank (hybrid) and the
        explanation's parts."""
        numbers = [("#", str(rank)), ("score", f"{hit.score:.4f}")]
        if self.hybrid:  # each side's rank beside the fused score ("–": beyond that side's candidates)
            numbers += [("dense #", _rank(hit.dense_rank)), ("text #", _rank(hit.lexical_rank))]
        explanation = self.explanations[rank - 1] if self.explanations else {}
        return numbers + [(heading, _value(explanation.get(key))) for key, heading in self.keys]

    @staticmethod
    def where(hit: SearchHit) -> str:
        return f"{hit.source} #{hit.position}" + (f" p.{hit.extra['page']}" if "page" in hit.extra else "")

    def table(self, headings: list[str], rows: list[list[tuple[str, str]]], source_width: int) -> Table:
        table = Table(title=Text(self.title), title_justify="left")
        for heading in headings:
            table.add_column(heading, justify="right", no_wrap=True)
        table.add_column("source", no_wrap=True, min_width=source_width)
        table.add_column("snippet")
        for hit, row in zip(self.hits, rows):
            table.add_row(*(value for _, value in row), Text(self.where(hit)), Text(snippet(hit.text)))
        return table

    def blocks(self, rows: list[list[tuple[str, str]]], width: int):
        """One block per hit: its rank and source on a line, its numbers packed into lines of
        ``label value`` (never split between label and value), the snippet wrapped below."""
        import textwrap

        room = max(width - len(BLOCK_INDENT), 20)
        yield Text(self.title, style="italic")
        for hit, row in zip(self.hits, rows):
            yield Text("")
            yield Text.assemble((f"{row[0][1]}. ", "bold"), (self.where(hit), "bold"), overflow="fold")
            lines = packed([f"{heading} {value}" for heading, value in row[1:]], room)
            lines += textwrap.wrap(snippet(hit.text), room)
            yield Text("\n".join(BLOCK_INDENT + line for line in lines), overflow="fold")


def packed(items: list[str], width: int, separator: str = "   ") -> list[str]:
    """``items`` joined into lines of at most ``width`` characters (an item longer than that alone on its line)."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(separator) + len(item) <= width:
            lines[-1] += separator + item
        else:
            lines.append(item)
    return lines


# A knob's column (the knob as given, or the model's own): keyed and headed by its declaration.
TWO_SPACE_COLUMNS = (
    ("llm", "LLM cos"),
    ("sentence_encoder", "sentence-encoder cos"),
    (LLM_WEIGHT.name, LLM_WEIGHT.heading),
    ("weighted", "weighted"),
)
EFFECT_COLUMNS = (  # an instruction-effect model (encoder/composed/effect.py's explain)
    ("plain", "plain cos"),
    ("instruction", "instruction"),
    (INSTRUCTION_STRENGTH.name, INSTRUCTION_STRENGTH.heading),
    ("effective_strength", "effective"),  # strength x the model's gain for this query
    ("combined", "combined"),
)


# The reader's second stage (service/answer.py reread): the first stage's score, the reader's part.
READER_COLUMNS = (("first_stage", "first stage"), ("reader", "reader"))


def explained_columns(explanations: list[dict] | None) -> list[tuple[str, str]]:
    """(key, heading) of the explanation columns: none, the two spaces' four, the instruction
    effect's four, or a model of one space's: the two sides of a hybrid score (its cosine, its bm25),
    none for a dense score (the score column is its one cosine already); then, where the reader
    re-read the hits, the first stage's score and the reader's part of the score."""
    if not explanations:
        return []
    reader = list(READER_COLUMNS) if any("reader" in row for row in explanations) else []
    if "llm" in explanations[0]:
        return list(TWO_SPACE_COLUMNS) + reader
    if "plain" in explanations[0]:
        return list(EFFECT_COLUMNS) + reader
    return ([("cosine", "cosine"), ("bm25", "bm25")] if "bm25" in explanations[0] else []) + reader


def _value(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _rank(value: int | None) -> str:
    return "–" if value is None else str(value)
