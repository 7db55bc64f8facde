"""The FastAPI app behind `instemb-rag serve`: the wiring.

    POST /v1/embeddings   OpenAI's embeddings schema + `instruction`, `input_type`
    POST /v1/search       {query, instruction, k, filter} over the index (= `instemb-rag query --json`)
    GET  /v1/models       the one model served (id, dimension, fingerprint)
    GET  /health          status, model, batching counters (no API key needed)
    GET  /docs            OpenAPI docs (/openapi.json)

``create_app(state)`` binds the state (state.py), the error handlers (errors.py), the body-size
limit and in-flight counter, and the endpoints (routes.py); the wire contract is schemas.py.
Embeddings and search queries go through one DynamicBatcher (serve/batching.py), so requests
that arrive together share a forward pass. The index (instemb_rag.index.Index) lives on one
thread of its own: its SQLite catalog belongs to the thread that opened it.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from .errors import install_error_handlers, too_large
from .routes import router
from .schemas import API_KEY_ENV
from .state import ServeOptions, ServerState

__all__ = ["API_KEY_ENV", "ServeOptions", "ServerState", "create_app"]

log = logging.getLogger("uvicorn.error")


def create_app(state: ServerState) -> FastAPI:
    options = state.options

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state.batcher.start()
        try:
            yield
        finally:
            # uvicorn gets here after in-flight requests have been answered (graceful shutdown).
            await asyncio.to_thread(state.close)
            log.info(
                "instemb-rag serve: stopped after %d forward batches (%d inputs); index closed",
                state.batcher.forward_batches,
                state.batcher.inputs_embedded,
            )

    app = FastAPI(
        title="instemb-rag",
        summary="Instruction-following embeddings (OpenAI-compatible) and search over an instemb-rag index.",
        version=_version(),
        lifespan=lifespan,
    )
    app.state.instemb = state

    install_error_handlers(app)

    # ------------------------------------------------------------------ limits and counters
    @app.middleware("http")
    async def _limits_and_counters(request: Request, call_next):
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > options.max_body_bytes:
            return too_large(
                f"The request body has {int(length):,} bytes; this server accepts at most "
                f"{options.max_body_bytes:,} (see --max-inputs and --max-chars)."
            ).response()
        counted = request.url.path.startswith("/v1/")
        if counted:
            state.in_flight += 1
        try:
            return await call_next(request)
        finally:
            if counted:
                state.in_flight -= 1

    app.include_router(router)
    return app


def _version() -> str:
    from .. import __version__

    return __version__
