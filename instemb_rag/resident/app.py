"""The resident query process: the query service's answer (service/answer.py, through
serve/search.py ``answer_search``, the server's) over a state per index, loaded on first use, on a Unix socket under $INSTEMB_HOME.

    POST /v1/resident/search   serve's SearchRequest + index_dir, model, device: the /v1/search
                               answer, with the index's notes and its model's query knob (what the
                               CLI prints beside the hits)
    GET  /v1/resident/status   pid, version, idle time, the indexes and models held

One encoder (and its batcher) per model reference, shared by every index built with it; one
ServerState per index folder, on its own thread (SQLite). Before each search the folder is
stamped (manifest and catalog files): an index rebuilt or updated since it was opened is closed
and opened again, so a query never sees a stale or mixed state. Catalogs are opened read-only: the
process never writes an index. An index on an embedded Qdrant shard holds the index lock while
open, so it is opened for one query at a time and closed after it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import Field

from ..serve.batching import BatchingOptions, DynamicBatcher
from ..serve.errors import APIError
from ..serve.routes import check_api_key
from ..serve.schemas import SearchRequest
from ..serve.search import answer_search
from ..serve.state import ServeOptions, ServerState, settle_the_heap

__all__ = ["ResidentSearchRequest", "ResidentState", "create_resident_app"]

log = logging.getLogger("uvicorn.error")

# The CLI's exit code for an error the process answers with (cli/common.py's table), by HTTP status.
EXIT_BY_STATUS = {400: 2, 404: 4, 409: 4, 413: 2, 422: 2, 503: 3}


class ResidentSearchRequest(SearchRequest):
    """/v1/search's request, plus which index (an absolute folder) and which model and device."""

    index_dir: str = Field(..., description="The index folder, an absolute path.")
    model: str | None = Field(None, description="--model: an absolute path or a model name; null = the index's own.")
    device: str = Field("auto", description="--device of the model.")


@dataclass
class HeldIndex:
    stamp: tuple
    state: ServerState
    transient: bool  # opened for one query (a store not kept_open: an embedded Qdrant shard holds the index lock)


class ResidentState:
    """The encoders and indexes the process holds, and its idle clock."""

    def __init__(self, idle_timeout: float, token: str | None = None, threads: int | None = None):
        # Limits of the command line, not of a shared server: any k, any query length.
        self.options = ServeOptions(
            model_id="instemb-resident",
            max_k=100_000,
            max_chars=1 << 20,
            api_key=token,
            batching=BatchingOptions(max_wait_ms=2.0),
        )
        self.idle_timeout = idle_timeout
        self.threads = threads  # torch CPU threads (None: torch's own)
        self.started = time.time()
        self.last_activity = time.monotonic()
        self.in_flight = 0
        self.encoders: dict[tuple[str | None, str], tuple[object, DynamicBatcher]] = {}
        self.indexes: dict[tuple[str, str | None, str], HeldIndex] = {}
        self.opening = asyncio.Lock()  # one load or reopen at a time; queries of held indexes go on

    # ------------------------------------------------------------------ indexes
    async def index_state(self, body: ResidentSearchRequest) -> HeldIndex:
        """The state of the request's index, opened (or reopened, when its folder changed) here."""
        key = (body.index_dir, body.model, body.device)
        async with self.opening:
            stamp = folder_stamp(Path(body.index_dir))
            held = self.indexes.get(key)
            if held is not None and held.stamp == stamp:
                return held
            if held is not None:
                del self.indexes[key]
                await asyncio.to_thread(close_index, held.state)
                log.info("instemb-rag daemon: %s changed on disk; reopening it", body.index_dir)
            held = await asyncio.to_thread(self._open, body, stamp)
            if not held.transient:
                self.indexes[key] = held
            settle_the_heap()
            return held

    def _open(self, body: ResidentSearchRequest, stamp: tuple) -> HeldIndex:
        from ..index import Index
        from ..index.manifest import model_label
        from ..index.search import require_manifest
        from ..index.stores.registry import store_registration

        index_dir = Path(body.index_dir)
        manifest = require_manifest(index_dir)  # no index there: say so before loading any model
        encoder, batcher = self._encoder(manifest.encoder_model(body.model), body.device)
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="instemb-index")
        try:
            index = thread.submit(
                Index.open,
                index_dir,
                encoder=encoder,
                model=body.model and model_label(body.model),
                device=body.device,
                read_only=True,
            ).result()
        except BaseException:
            thread.shutdown()
            raise
        state = ServerState(encoder, self.options, index, thread, batcher=batcher)
        # a store the process may not keep open between queries (its registration says: an embedded
        # Qdrant shard holds the index lock while open) is opened for this query only
        return HeldIndex(stamp, state, transient=not store_registration(index.manifest.store).kept_open)

    def _encoder(self, reference: str | None, device: str):
        """The model ``reference`` (None: the shipped default), loaded once per process."""
        key = (reference, device)
        if key not in self.encoders:
            from ..encoder import load_model

            if self.threads:
                import torch

                torch.set_num_threads(self.threads)
            started = time.perf_counter()
            encoder = load_model(reference, device=device)
            self.encoders[key] = (encoder, DynamicBatcher(encoder, self.options.batching).start())
            log.info(
                "instemb-rag daemon: loaded %s in %.1f s",
                reference or "the default model",
                time.perf_counter() - started,
            )
        return self.encoders[key]

    async def let_go_of_changed_indexes(self) -> None:
        """Close every held index whose folder was rebuilt, updated or deleted since it was opened:
        the next query to it opens it again; a deleted one holds no files open in the meantime."""
        async with self.opening:
            changed = [key for key, held in self.indexes.items() if folder_stamp(Path(key[0])) != held.stamp]
            for key in changed:
                await asyncio.to_thread(close_index, self.indexes.pop(key).state)

    # ------------------------------------------------------------------ status and shutdown
    def status(self) -> dict:
        from .. import __version__
        from .endpoint import code_location

        return {
            "pid": os.getpid(),
            "version": __version__,
            "code": code_location(),
            "started": self.started,
            "idle_timeout": self.idle_timeout,
            "idle_for": round(time.monotonic() - self.last_activity, 1),
            "in_flight": self.in_flight,
            "indexes": [
                {"index_dir": index_dir, "model": model, "device": device, "store": held.state.index.manifest.store}
                for (index_dir, model, device), held in self.indexes.items()
            ],
            "models": [{"model": reference or "default", "device": device} for reference, device in self.encoders],
        }

    def close(self) -> None:
        for held in self.indexes.values():
            close_index(held.state)
        self.indexes.clear()
        for _, batcher in self.encoders.values():
            batcher.close()


def folder_stamp(index_dir: Path) -> tuple:
    """What changes when an index is rebuilt or updated: its manifest (rewritten by every `index`
    run) and its catalog file (replaced by a rebuild); () when there is no index there (opening it
    then says so)."""
    parts = []
    for name in ("manifest.json", "catalog.sqlite"):
        try:
            info = (index_dir / name).stat()
        except FileNotFoundError:
            return ()
        parts.append(
            (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
            if name == "manifest.json"
            else (info.st_dev, info.st_ino)
        )
    return tuple(parts)


def close_index(state: ServerState) -> None:
    """An index's catalog and store, on the thread that opened them; its encoder stays loaded."""
    try:
        state.index_thread.submit(state.index.close).result()
    finally:
        state.index_thread.shutdown()


def error_response(status: int, message: str, exit_code: int | None = None) -> JSONResponse:
    """OpenAI's error shape (as serve answers), plus the exit code the CLI leaves with."""
    code = exit_code if exit_code is not None else EXIT_BY_STATUS.get(status, 1)
    body = {"error": {"message": message, "type": "invalid_request_error", "exit_code": code}}
    return JSONResponse(body, status_code=status)


def create_resident_app(state: ResidentState) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        watcher = asyncio.create_task(exit_when_idle(state))
        try:
            yield
        finally:
            watcher.cancel()
            await asyncio.to_thread(state.close)

    app = FastAPI(title="instemb-rag resident query process", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.instemb = state  # serve's check_api_key reads the options (the loopback token) there

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        fields = "; ".join(f"{'.'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in error.errors())
        return error_response(422, f"invalid request: {fields}")

    @app.exception_handler(APIError)
    async def _api_error(request: Request, error: APIError) -> JSONResponse:
        return error_response(error.status, error.message)

    @app.middleware("http")
    async def _activity(request: Request, call_next):
        state.in_flight += 1
        try:
            return await call_next(request)
        finally:
            state.in_flight -= 1
            state.last_activity = time.monotonic()

    @app.post("/v1/resident/search", dependencies=[Depends(check_api_key)])
    async def resident_search(body: ResidentSearchRequest) -> JSONResponse:
        from ..errors import InstEmbError
        from ..exit_codes import exit_code_for

        try:
            held = await state.index_state(body)
        except InstEmbError as error:
            return error_response(400, str(error), exit_code_for(error))
        try:
            answer = await answer_search(
                SearchRequest(**body.model_dump(exclude={"index_dir", "model", "device"})), held.state
            )
        finally:
            if held.transient:
                await asyncio.to_thread(close_index, held.state)
        return JSONResponse({"answer": answer.to_document(), "query_knob": answer.query_knob, "notes": answer.notes})

    @app.get("/v1/resident/status", dependencies=[Depends(check_api_key)])
    async def resident_status() -> dict:
        return state.status()

    return app


async def exit_when_idle(state: ResidentState) -> None:
    """SIGTERM to itself after ``idle_timeout`` seconds without a request: uvicorn's graceful exit.
    Meanwhile, indexes whose folder changed or vanished are let go (their files, memory)."""
    period = min(5.0, state.idle_timeout / 4)
    while True:
        await asyncio.sleep(period)
        await state.let_go_of_changed_indexes()
        if state.in_flight == 0 and time.monotonic() - state.last_activity >= state.idle_timeout:
            log.info("instemb-rag daemon: idle for %.0f s; exiting", state.idle_timeout)
            os.kill(os.getpid(), signal.SIGTERM)
            return
