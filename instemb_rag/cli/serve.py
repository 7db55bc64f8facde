"""`instemb-rag serve`: OpenAI-compatible embeddings with instructions, and search over an index."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from .common import say
from .index import EXIT_BAD_INPUT, exit_code_for

DEFAULT_MODEL_ID = "instemb-default"
SERVE_EXTRA_HINT = "install the serve extra, `pip install 'instemb-rag[serve]'`."


def serve_command(
    index_dir: Path | None = typer.Option(
        None,
        "--index-dir",
        help="Index folder to serve /v1/search over (built by `instemb-rag index`); without it only embeddings are served.",
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to bind; 0.0.0.0 exposes the server to the network (set INSTEMB_API_KEY then).",
    ),
    port: int = typer.Option(
        8000, "--port", min=0, max=65535, help="TCP port; 0 picks a free one (the address is printed)."
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Encoder checkpoint or HF model folder; default: the index's encoder, else the shipped default.",
    ),
    model_name: str | None = typer.Option(
        None,
        "--model-name",
        help="Model id clients send as `model` (default: instemb-default, or the model folder's name).",
    ),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda"),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="torch CPU threads for the forward passes (default: torch's own)."
    ),
    batching: bool = typer.Option(
        True, "--batching/--no-batching", help="Dynamic batching: requests arriving together share one forward pass."
    ),
    max_batch_size: int = typer.Option(32, "--max-batch-size", min=1, help="Inputs per forward pass at most."),
    max_wait_ms: float = typer.Option(
        5.0, "--max-wait-ms", min=0.0, help="How long a request waits for others to share its forward pass."
    ),
    max_queue: int = typer.Option(
        1024, "--max-queue", min=1, help="Inputs waiting at most; beyond that requests get 503 (retry)."
    ),
    max_inputs: int = typer.Option(
        256, "--max-inputs", min=1, help="Inputs per /v1/embeddings request at most (else 413)."
    ),
    max_chars: int = typer.Option(32_768, "--max-chars", min=1, help="Characters per input at most (else 413)."),
    max_k: int = typer.Option(100, "--max-k", min=1, help="Hits per /v1/search request at most."),
    graceful_timeout: float = typer.Option(
        30.0, "--graceful-timeout", min=0.0, help="Seconds to finish in-flight requests on SIGTERM/Ctrl-C."
    ),
    log_level: str = typer.Option(
        "info", "--log-level", help="critical | error | warning | info | debug (debug logs each request)."
    ),
) -> None:
    """Serve POST /v1/embeddings (OpenAI schema + instruction), POST /v1/search, GET /health, /docs."""
    from rich.console import Console

    console = Console(stderr=True)
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        say(console, "error", f"{error.name} is not installed: {SERVE_EXTRA_HINT}", "red")
        raise typer.Exit(EXIT_BAD_INPUT) from None

    from ..errors import InstEmbError
    from ..serve import API_KEY_ENV, BatchingOptions, ServeOptions, ServerState, create_app
    from ..serve.server import bind_socket, run
    from ..serve.state import settle_the_heap

    api_key = os.environ.get(API_KEY_ENV) or None
    try:
        sock = bind_socket(host, port)
    except OSError as error:
        say(
            console,
            "error",
            f"cannot listen on {host}:{port} ({error.strerror or error}): "
            "pick another --port (0 = any free port) or stop what holds it.",
            "red",
        )
        raise typer.Exit(EXIT_BAD_INPUT) from None
    if threads:
        import torch

        torch.set_num_threads(threads)
    try:
        options = ServeOptions(
            model_id=model_name or DEFAULT_MODEL_ID,
            max_inputs=max_inputs,
            max_chars=max_chars,
            max_k=max_k,
            api_key=api_key,
            batching=BatchingOptions(
                enabled=batching, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, max_queue=max_queue
            ),
        )
        state = ServerState.open(options, model=model, index_dir=index_dir, device=device)
        settle_the_heap()
        if model_name is None:
            options.model_id = served_model_id(model, state.index)
    except InstEmbError as error:
        sock.close()
        say(console, "error", error, "red")
        raise typer.Exit(exit_code_for(error)) from None
    if not api_key and host not in ("127.0.0.1", "localhost", "::1"):
        say(
            console,
            "warning",
            f"listening on {host} without an API key: anyone who can reach "
            f"this address can use the server. Set {API_KEY_ENV} to require 'Authorization: Bearer <key>'.",
        )
    run(create_app(state), sock, log_level=log_level, graceful_timeout=graceful_timeout, on_exit=state.batcher.drain)


def served_model_id(model: str | None, index) -> str:
    """instemb-default for the shipped default, else the model folder's name."""
    reference = index.manifest.encoder_model(model) if index is not None else model
    if reference in (None, "default"):
        return DEFAULT_MODEL_ID
    return Path(reference).name or str(reference)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
