"""`instemb-rag index PATH`: embed a folder of documents once, incrementally and crash-safely."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.core import TyperCommand

from ..choices import Precision, supported_types
from .common import (  # noqa: F401
    ExitCode,
    compile_option,
    device_option,
    exit_code_for,
    fail,
    load_encoder,
    precision_option,
    strict_precision_option,
)
from .store_options import STORE_OPTIONS_HERE, store_options

# The exit codes of the one table in common.py, under the names the index tests use.
EXIT_BAD_INPUT = ExitCode.BAD_INPUT
EXIT_INDEX_FOLDER = ExitCode.INDEX_FOLDER
EXIT_BUSY = ExitCode.BUSY
RAY_LOCAL = "local"
# The help lists the common options first, then the Qdrant server's in a panel of their own.
QDRANT_PANEL = "Qdrant server (--store qdrant)"
DATA_FILES_HELP = (
    "Data files (.json, .jsonl, .csv) are left out unless an --include pattern matches them: results, logs and "
    "tables would outnumber the prose's chunks many times over."
)


class RayOptionalValueCommand(TyperCommand):
    """``--ray`` takes an optional value: a bare ``--ray`` (last, or followed by another option)
    means a local Ray runtime. typer options cannot have optional values, so the argument list
    gets the implicit ``local`` before parsing."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        fixed: list[str] = []
        for position, arg in enumerate(args):
            fixed.append(arg)
            following = args[position + 1] if position + 1 < len(args) else None
            if arg == "--ray" and (following is None or following.startswith("-")):
                fixed.append(RAY_LOCAL)
        return super().parse_args(ctx, fixed)

    def format_options(self, ctx, formatter) -> None:
        """click's plain help (the app turns rich off), with each option under its declared
        ``rich_help_panel``: the common options first, then the Qdrant server's."""
        arguments, panels = [], {"Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        for title, records in panels.items():
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)


@store_options()
def index_command(
    path: Path = typer.Argument(
        ...,
        help=f"Folder (or file) of documents: {supported_types()}. Hidden files and folders are skipped, .gitignore "
        f"and .instembignore honoured. {DATA_FILES_HELP}",
    ),
    index_dir: Path = typer.Option(Path(".instemb"), "--index-dir", help="Where the index lives."),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Encoder checkpoint or HF model folder; default: the shipped default."
    ),
    stores: object = STORE_OPTIONS_HERE,  # a StoreOptions from --store, --faiss-index, --qdrant-url... (store_options.py)
    ray: str | None = typer.Option(
        None,
        "--ray",
        metavar="[ADDRESS]",
        help="Embed on Ray (`ray` extra): --ray alone starts a local runtime; auto, HOST:PORT or ray://HOST:PORT joins a cluster. Put it after PATH.",
    ),
    ray_workers: int | None = typer.Option(
        None, "--ray-workers", min=1, help="With --ray: encoder actors; default one per GPU, else one per free CPU."
    ),
    ray_gpus_per_worker: float | None = typer.Option(
        None,
        "--ray-gpus-per-worker",
        min=0.0,
        help="With --ray: GPUs per actor; default 1 where the cluster has GPUs, else 0.",
    ),
    ray_cpus_per_worker: float = typer.Option(
        1.0, "--ray-cpus-per-worker", min=0.01, help="With --ray: CPUs per actor (torch threads on CPU actors)."
    ),
    chunk_size: int | None = typer.Option(
        None,
        "--chunk-size",
        min=16,
        help="Chunk length, in tokens of the model's document side. Default: 256, or that side's token limit "
        "when lower (the sentence encoder of a two-tower or two-space model reads fewer).",
    ),
    chunk_overlap: int = typer.Option(32, "--chunk-overlap", min=0, help="Tokens shared by neighbouring chunks."),
    max_file_size: float = typer.Option(20.0, "--max-file-size", min=0.0, help="Skip files larger than this many MB."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Start over: drop the index and embed everything."),
    wait: float = typer.Option(0.0, "--wait", min=0.0, help="Seconds to wait if another index run holds the lock."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, help="Chunks per forward pass."),
    device: str = device_option(),
    precision: Precision = precision_option(),
    strict_precision: bool = strict_precision_option(),
    compile: bool = compile_option(),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show the progress bar."),
    no_daemon: bool = typer.Option(
        False,
        "--no-daemon",
        envvar="INSTEMB_NO_DAEMON",
        help="Do not start the resident query process afterwards (by default it starts in the background and "
        "opens this index, so the next query answers warm); also INSTEMB_NO_DAEMON=1.",
    ),
    include: list[str] = typer.Option(
        [],
        "--include",
        metavar="PATTERN",
        help="Read only files matching this .gitignore-style pattern (relative to PATH; repeatable), e.g. "
        "'*.md', 'notes/', 'results/*.json'. The only way to read data files (.json, .jsonl, .csv).",
    ),
    exclude: list[str] = typer.Option(
        [],
        "--exclude",
        metavar="PATTERN",
        help="Leave out files (or folders: 'drafts/') matching this pattern (repeatable); wins over --include.",
    ),
    no_ignore: bool = typer.Option(
        False, "--no-ignore", help="Read what .gitignore and .instembignore files leave out (hidden paths stay out)."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the plan (files and chunks per kind, what is left out, a time estimate from one measured "
        "batch) and exit; nothing is written.",
    ),
) -> None:
    """Index documents: only new or changed files are embedded; deleted files are dropped."""
    from rich.console import Console

    from ..errors import InstEmbError
    from ..index import Indexer, IndexOptions
    from ..index.display import RichChunkProgress, print_summary
    from ..index.manifest import model_label
    from ..index.selection import FileSelection

    console = Console()
    if chunk_overlap >= (chunk_size or 256):
        fail(
            f"--chunk-overlap ({chunk_overlap}) must be smaller than --chunk-size ({chunk_size or 256}).",
            ExitCode.BAD_INPUT,
        )
    if ray is None and (ray_workers or ray_gpus_per_worker is not None):
        fail("--ray-workers and --ray-gpus-per-worker need --ray.", ExitCode.BAD_INPUT)
    options = IndexOptions(
        index_dir=index_dir,
        stores=stores,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        max_file_bytes=int(max_file_size * 1024 * 1024),
        rebuild=rebuild,
        wait_seconds=wait,
        batch_size=batch_size,
        model_label=model_label(model),
        selection=FileSelection(tuple(include), tuple(exclude), use_ignore_files=not no_ignore),
        dry_run=dry_run,
    )
    try:
        if ray is not None:
            options.ray = ray_options(
                ray, ray_workers, ray_gpus_per_worker, ray_cpus_per_worker, model, device, precision
            )
        encoder = load_encoder(model, device, precision, compile, strict_precision)
        with RichChunkProgress(console, enabled=progress) as bar:
            report = Indexer(encoder, options).run(path, bar)
    except (InstEmbError, ValueError) as error:
        fail(error)
    if dry_run:
        console.print("dry run: nothing was embedded or written.")
        return
    print_summary(console, report, index_dir)
    if report.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    warm_resident_process(index_dir, no_daemon)


def warm_resident_process(index_dir: Path, no_daemon: bool) -> None:
    """The resident query process started and asked once in the background (resident/warm.py)."""
    from rich.console import Console

    from ..resident.warm import warm_in_background
    from .common import say

    note = warm_in_background(index_dir, no_daemon)
    if note is not None:
        say(Console(stderr=True), "note", note)


def ray_options(address: str, workers, gpus_per_worker, cpus_per_worker, model, device, precision):
    """The --ray options; the Ray address is checked before any model is loaded (fails in seconds)."""
    try:
        import ray  # noqa: F401

        from ..index.options import RayOptions
        from ..index.ray_embedding import check_ray_reachable, resolve_auto
    except ImportError as error:  # the `ray` extra is not installed
        raise ValueError(f"--ray needs Ray: pip install 'instemb-rag[ray]' ({error}).") from None
    if address != RAY_LOCAL:
        check_ray_reachable(resolve_auto() if address == "auto" else address)
    encoder_kwargs = {
        "path": str(Path(model).resolve()) if model else None,
        "device": device,
        "precision": Precision(precision).value,
    }
    return RayOptions(
        address=None if address == RAY_LOCAL else address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        cpus_per_worker=cpus_per_worker,
        encoder_kwargs=encoder_kwargs,
    )


def register(app: typer.Typer) -> None:
    app.command("index", cls=RayOptionalValueCommand)(index_command)
