"""`instemb-rag index PATH`: embed a folder of documents once, incrementally and crash-safely."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

# Exit codes shared by index, query and demo.
EXIT_BAD_INPUT = 1
EXIT_INDEX_FOLDER = 2
EXIT_BUSY = 3


def exit_code_for(error: Exception) -> int:
    from ..index import BadInputError, IndexBusyError

    if isinstance(error, BadInputError):
        return EXIT_BAD_INPUT
    if isinstance(error, IndexBusyError):
        return EXIT_BUSY
    return EXIT_INDEX_FOLDER


def load_encoder(model: Optional[str], device: str, precision: str = "fp32", compile: bool = False):
    from ..encoder import InstEmbEncoder

    encoder = InstEmbEncoder.from_pretrained(model, device=device, precision=precision)
    if compile:
        from ..fast.compiled import compile_encoder

        compile_encoder(encoder)
    return encoder


def model_label(model: Optional[str]) -> str:
    return str(Path(model).resolve()) if model else "default"


def index_command(
    path: Path = typer.Argument(..., help="Folder (or file) of .txt .md .html .pdf .json .csv documents."),
    index_dir: Path = typer.Option(Path(".instemb"), "--index-dir", help="Where the index lives."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Encoder checkpoint or HF model folder; default: the shipped default."),
    store: Optional[str] = typer.Option(None, "--store", help="faiss (default for a new index) | qdrant."),
    faiss_index: Optional[str] = typer.Option(None, "--faiss-index", help="flat (exact, default) | hnsw | ivf."),
    qdrant_url: Optional[str] = typer.Option(None, "--qdrant-url", help="Qdrant server/cluster URL; default: embedded on disk."),
    qdrant_api_key: Optional[str] = typer.Option(None, "--qdrant-api-key", envvar="QDRANT_API_KEY", help="API key for --qdrant-url."),
    qdrant_collection: str = typer.Option("instemb", "--qdrant-collection", help="Collection name on the server."),
    chunk_size: int = typer.Option(256, "--chunk-size", min=16, help="Chunk length in encoder tokens."),
    chunk_overlap: int = typer.Option(32, "--chunk-overlap", min=0, help="Tokens shared by neighbouring chunks."),
    max_file_size: float = typer.Option(20.0, "--max-file-size", min=0.0, help="Skip files larger than this many MB."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Start over: drop the index and embed everything."),
    wait: float = typer.Option(0.0, "--wait", min=0.0, help="Seconds to wait if another index run holds the lock."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Chunks per forward pass."),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda"),
    precision: str = typer.Option("fp32", "--precision", help="fp32 (default) | int8: dynamic int8 linear layers on the CPU (faster; inference only). Query with the same precision."),
    compile: bool = typer.Option(False, "--compile", help="Opt-in torch.compile of the backbone (cached under INSTEMB_HOME; the first run compiles for minutes)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Index documents: only new or changed files are embedded; deleted files are dropped."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..index import Indexer, IndexOptions, StoreOptions
    from ..index.display import RichChunkProgress, print_summary

    console = Console()
    if chunk_overlap >= chunk_size:
        console.print(f"[red]error:[/red] --chunk-overlap ({chunk_overlap}) must be smaller than --chunk-size ({chunk_size}).")
        raise typer.Exit(EXIT_BAD_INPUT)
    options = IndexOptions(
        index_dir=index_dir,
        stores=StoreOptions(store, faiss_index, qdrant_url, qdrant_api_key, qdrant_collection),
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, max_file_bytes=int(max_file_size * 1024 * 1024),
        rebuild=rebuild, wait_seconds=wait, batch_size=batch_size, model_label=model_label(model),
    )
    try:
        encoder = load_encoder(model, device, precision, compile)
        with RichChunkProgress(console, enabled=progress) as bar:
            report = Indexer(encoder, options).run(path, bar)
    except (InstEmbError, ValueError) as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(exit_code_for(error)) from None
    print_summary(console, report, index_dir)


def register(app: typer.Typer) -> None:
    app.command("index")(index_command)
