"""`instemb-rag demo`: index the bundled sample catalogue and ask one question two ways.

The sample documents (instemb_rag/sample_docs/) are a fictional outdoor-gear catalogue written
for this project: tents, backpacks and stoves, described either by their durability and
weather resistance or by their packed size and weight.
"""

from __future__ import annotations

import tempfile
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


def demo_command(
    index_dir: Path | None = typer.Option(
        None, "--index-dir", help="Keep the demo index here (default: a temporary folder)."
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
    from ..index import Index, Indexer, IndexOptions, StoreOptions
    from ..index.display import RichChunkProgress, hits_table, print_summary
    from ..index.manifest import model_label

    console = Console()
    with tempfile.TemporaryDirectory(prefix="instemb-demo-") as scratch:
        target = index_dir or Path(scratch) / "index"
        try:
            encoder = load_encoder(model, device)
            options = IndexOptions(
                index_dir=target, stores=StoreOptions(store=store.value), model_label=model_label(model)
            )
            with RichChunkProgress(console) as bar:
                report = Indexer(encoder, options).run(SAMPLE_DOCS, bar)
            print_summary(console, report, target)
            with Index.open(target, encoder=encoder) as index:
                for instruction in DEMO_INSTRUCTIONS:
                    hits = index.search(DEMO_QUERY, instruction, k=k)
                    console.print(hits_table(hits, f"{DEMO_QUERY!r} — instruction: {instruction!r}"))
        except InstEmbError as error:
            fail(error)
    if index_dir is None:  # the summary named a folder that is gone now: say how to keep one
        console.print(
            Text(
                "The demo index was temporary. Your own documents: instemb-rag index FOLDER (into .instemb/), "
                "then instemb-rag query 'your question' --instruction 'what matters to you'"
            )
        )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
