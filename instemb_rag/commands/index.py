"""`instemb-rag index PATH`: embed a folder of documents once, incrementally and crash-safely."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..choices import FaissIndexKind, StoreKind
from .common import (  # noqa: F401
    ExitCode,
    Precision,
    compile_option,
    device_option,
    exit_code_for,
    fail,
    load_encoder,
    model_label,
    precision_option,
)

# The exit codes of the one table in common.py, under the names the index tests use.
EXIT_BAD_INPUT = ExitCode.BAD_INPUT
EXIT_INDEX_FOLDER = ExitCode.INDEX_FOLDER
EXIT_BUSY = ExitCode.BUSY


def index_command(
    path: Path = typer.Argument(..., help="Folder (or file) of .txt .md .html .pdf .json .csv documents."),
    index_dir: Path = typer.Option(Path(".instemb"), "--index-dir", help="Where the index lives."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Encoder checkpoint or HF model folder; default: the shipped default."),
    store: Optional[StoreKind] = typer.Option(None, "--store", help="Vector store; default: faiss for a new index, the index's own otherwise."),
    faiss_index: Optional[FaissIndexKind] = typer.Option(None, "--faiss-index", help="flat is exact (default); hnsw and ivf are approximate."),
    qdrant_url: Optional[str] = typer.Option(None, "--qdrant-url", help="Qdrant server/cluster URL; default: embedded on disk."),
    qdrant_api_key: Optional[str] = typer.Option(None, "--qdrant-api-key", envvar="QDRANT_API_KEY", help="API key for --qdrant-url."),
    qdrant_collection: str = typer.Option("instemb", "--qdrant-collection", help="Collection name on the server."),
    chunk_size: int = typer.Option(256, "--chunk-size", min=16, help="Chunk length in encoder tokens."),
    chunk_overlap: int = typer.Option(32, "--chunk-overlap", min=0, help="Tokens shared by neighbouring chunks."),
    max_file_size: float = typer.Option(20.0, "--max-file-size", min=0.0, help="Skip files larger than this many MB."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Start over: drop the index and embed everything."),
    wait: float = typer.Option(0.0, "--wait", min=0.0, help="Seconds to wait if another index run holds the lock."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Chunks per forward pass."),
    device: str = device_option(),
    precision: Precision = precision_option(),
    compile: bool = compile_option(),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
) -> None:
    """Index documents: only new or changed files are embedded; deleted files are dropped."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..index import Indexer, IndexOptions, StoreOptions
    from ..index.display import RichChunkProgress, print_summary

    console = Console()
    if chunk_overlap >= chunk_size:
        fail(f"--chunk-overlap ({chunk_overlap}) must be smaller than --chunk-size ({chunk_size}).", ExitCode.BAD_INPUT)
    options = IndexOptions(
        index_dir=index_dir,
        stores=StoreOptions(store and store.value, faiss_index and faiss_index.value, qdrant_url, qdrant_api_key,
                            qdrant_collection),
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, max_file_bytes=int(max_file_size * 1024 * 1024),
        rebuild=rebuild, wait_seconds=wait, batch_size=batch_size, model_label=model_label(model),
    )
    try:
        encoder = load_encoder(model, device, precision, compile)
        with RichChunkProgress(console, enabled=progress) as bar:
            report = Indexer(encoder, options).run(path, bar)
    except (InstEmbError, ValueError) as error:
        fail(error)
    print_summary(console, report, index_dir)


def register(app: typer.Typer) -> None:
    app.command("index")(index_command)
