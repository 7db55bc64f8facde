"""`instemb-rag demo`: index the bundled sample catalogue and ask one question two ways.

The sample documents (instemb_rag/sample_docs/) are a fictional outdoor-gear catalogue written
for this project: tents, backpacks and stoves. Each demo instruction has one tent written to be
its answer, described by meaning rather than by the instruction's words (the Stormguard 4S
survives years of gales and snow; the Featherlite UL1 is 790 g and rolls up like a water
bottle), and one page, the Ridgeline 2P, repeats both instructions' words only to say it is the
wrong choice: matching words picks it, reading the instruction does not. The pages were written
before any model read them and are kept as written; the demo prints where the written answer
ranked, right or wrong.
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..choices import StoreKind
from .common import device_option, fail, load_encoder

SAMPLE_DOCS = Path(__file__).resolve().parent.parent / "sample_docs"
DEMO_QUERY = "Which tent should I buy?"
DEMO_INSTRUCTIONS = (
    "Focus on durability, materials and weather resistance.",
    "Focus on packed size and weight.",
)
# The page each instruction's answer was written in (by meaning), and the page that only repeats
# the instructions' words.
WRITTEN_ANSWERS = dict(zip(DEMO_INSTRUCTIONS, ("tents/stormguard-4s.md", "tents/featherlite-ul1.md")))
WORD_MATCH_ONLY = "tents/ridgeline-2p.md"


def demo_command(
    index_dir: Path | None = typer.Option(
        None,
        "--index-dir",
        help="The demo index (default: demo-index under $INSTEMB_HOME, kept, so that `query` can ask it more).",
    ),
    model: str | None = typer.Option(None, "--model", "-m", help="Encoder; default: the shipped default."),
    k: int = typer.Option(3, "-k", min=1, help="Results per instruction."),
    store: StoreKind = typer.Option(StoreKind.faiss, "--store", help="Vector store of the demo index."),
    device: str = device_option(),
) -> None:
    """Index the sample documents, then run one query under two instructions."""
    from rich.console import Console
    from rich.text import Text

    from ..errors import InstEmbError
    from ..index import Indexer, IndexOptions, StoreOptions
    from ..index.display import RichChunkProgress, hits_table, print_summary
    from ..index.manifest import model_label
    from ..paths import instemb_home

    console = Console()
    target = index_dir or instemb_home() / "demo-index"
    try:
        encoder = load_encoder(model, device)
        options = IndexOptions(index_dir=target, stores=StoreOptions(store=store.value), model_label=model_label(model))
        with RichChunkProgress(console) as bar:
            report = Indexer(encoder, options).run(SAMPLE_DOCS, bar)
        print_summary(console, report, target)
        for number, instruction in enumerate(DEMO_INSTRUCTIONS):
            hits, how = ask(target, instruction, k, model, device, encoder, first=number == 0)
            console.print(hits_table(hits, f"{DEMO_QUERY!r} — instruction: {instruction!r}"))
            console.print(Text(where_the_answer_ranked(instruction, [hit.source for hit in hits], k) + how + "\n"))
    except InstEmbError as error:
        fail(error)
    console.print(
        Text(
            f"Ask the demo index more (answered by the resident query process in a blink): instemb-rag query "
            f"'{DEMO_QUERY}' --instruction 'what matters to you' --index-dir {target}\n"
            "Your own documents: instemb-rag index FOLDER (into .instemb/), then instemb-rag query 'your question' "
            "--instruction 'what matters to you'"
        )
    )


def ask(target: Path, instruction: str, k: int, model, device: str, encoder, first: bool):
    """One demo question as `instemb-rag query` answers it: through the resident query process
    (what a user's queries use), or here with the encoder that indexed, under --no-daemon or where
    that process cannot answer. (hits, a line saying which answered and how long it took)."""
    import time

    from ..index import Index
    from ..resident.ask import Asker
    from ..resident.client import resident_wanted
    from ..service.request import QueryRequest
    from .query import note_on_stderr

    request = QueryRequest(DEMO_QUERY, instruction, k=k, index_dir=str(target), model=model, device=device)
    started = time.perf_counter()
    asker = Asker(resident_wanted(), note_on_stderr, open_index=lambda request: Index.open(target, encoder=encoder))
    hits = asker.answer(request).hits
    if asker.use_resident:
        seconds = time.perf_counter() - started
        start = " (it started and loaded the model: later queries reuse them)" if first else ""
        return hits, f"answered by the resident query process in {seconds:.2f} s{start}"
    return hits, f"answered in this process in {time.perf_counter() - started:.2f} s"


def where_the_answer_ranked(instruction: str, sources: list[str], k: int) -> str:
    """One line under an instruction's table: where the page written as its answer ranked, and
    where the page that only repeats its words did."""

    def place(source: str) -> str:
        return f"#{sources.index(source) + 1}" if source in sources else f"not in the top {k}"

    answer = WRITTEN_ANSWERS[instruction]
    return (
        f"written as this instruction's answer, by meaning: {answer} ({place(answer)})\n"
        f"repeats the instruction's words, the wrong tent: {WORD_MATCH_ONLY} ({place(WORD_MATCH_ONLY)})\n"
    )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
