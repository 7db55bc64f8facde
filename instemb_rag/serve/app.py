"""The FastAPI app behind `instemb-rag serve`.

    POST /v1/embeddings   OpenAI's embeddings schema + `instruction`, `input_type`
    POST /v1/search       {query, instruction, k, filter} over the index (= `instemb-rag query --json`)
    GET  /v1/models       the one model served (id, dimension, fingerprint)
    GET  /health          status, model, batching counters (no API key needed)
    GET  /docs            OpenAPI docs (/openapi.json)

Embeddings and search queries go through one DynamicBatcher (serve/batching.py), so requests
that arrive together share a forward pass. The index (instemb_rag.index.Index) lives on one
thread of its own: its SQLite catalog belongs to the thread that opened it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import InstEmbError
from ..index.errors import BadInputError, IndexBusyError
from ..index.search import FILTER_KEYS
from .batching import BatcherClosedError, BatchingOptions, DynamicBatcher, QueueFullError
from .schemas import (
    EmbeddingRequest,
    EmbeddingResponse,
    ErrorResponse,
    Health,
    ModelCard,
    ModelList,
    SearchRequest,
    SearchResponse,
)

API_KEY_ENV = "INSTEMB_API_KEY"
log = logging.getLogger("uvicorn.error")


@dataclass
class ServeOptions:
    model_id: str = "instemb-default"
    max_inputs: int = 256  # inputs per /v1/embeddings request
    max_chars: int = 32_768  # characters per input (and per instruction, and per search query)
    max_k: int = 100  # hits per /v1/search request
    api_key: str | None = None  # Bearer key; None = open
    batching: BatchingOptions = field(default_factory=BatchingOptions)

    @property
    def max_body_bytes(self) -> int:
        """A request body no valid request can exceed (UTF-8 JSON, escapes included) + 1 MiB."""
        return self.max_inputs * self.max_chars * 6 * 2 + (1 << 20)


class APIError(Exception):
    """An error answered with OpenAI's error shape and an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(body, status_code=self.status, headers=headers)


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def too_large(message: str, param: str | None = None) -> APIError:
    return APIError(413, message, param=param, code="request_too_large")


def unavailable(message: str) -> APIError:
    return APIError(503, message, type="server_error", code="service_unavailable")


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in {
        400: "Bad input (OpenAI error shape)",
        401: "Missing or wrong API key",
        404: "Unknown model, or no index served",
        413: "Too many inputs, or an input too long",
        503: "Busy (queue full) or shutting down; retry",
    }.items()
}


class ServerState:
    """What the endpoints share: the encoder's batcher, the optional index and its thread."""

    def __init__(self, encoder, options: ServeOptions, index=None, index_thread: ThreadPoolExecutor | None = None):
        self.encoder = encoder
        self.options = options
        self.index = index
        self.batcher = DynamicBatcher(encoder, options.batching)
        # The catalog's SQLite connection belongs to the thread that opened the index.
        self.index_thread = index_thread or ThreadPoolExecutor(max_workers=1, thread_name_prefix="instemb-index")
        self.created = int(time.time())
        self.in_flight = 0

    @classmethod
    def open(cls, options: ServeOptions, model: str | None = None, index_dir=None, device: str = "auto") -> ServerState:
        """Load the encoder (the index's own when an index is given) and open the index."""
        if index_dir is None:
            from ..encoder import InstEmbEncoder

            return cls(InstEmbEncoder.from_pretrained(model, device=device), options)
        from ..index import Index
        from ..index.manifest import model_label

        index_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="instemb-index")
        try:
            index = index_thread.submit(
                Index.open, index_dir, model=model and model_label(model), device=device
            ).result()
        except BaseException:
            index_thread.shutdown()
            raise
        return cls(index.encoder, options, index, index_thread)

    async def on_index_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.index_thread, fn, *args)

    def close(self) -> None:
        self.batcher.close()
        if self.index is not None:
            self.index_thread.submit(self.index.close).result()
        self.index_thread.shutdown()


def create_app(state: ServerState) -> FastAPI:
    options = state.options
    bearer = HTTPBearer(auto_error=False, description=f"Needed when the server was started with {API_KEY_ENV} set.")

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

    # ------------------------------------------------------------------ errors in OpenAI's shape
    @app.exception_handler(APIError)
    async def _api_error(request: Request, error: APIError) -> JSONResponse:
        return error.response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        first = problems[0] if problems else {}
        if first.get("type") == "json_invalid":
            position = first.get("loc", ("body", "?"))[-1]
            return bad_request(
                f"The request body is not valid JSON ({first.get('msg', 'decode error')} at "
                f"character {position}); send a JSON object, see /docs."
            ).response()
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        message = (
            f"{where}: {first.get('msg', 'invalid request')}"
            if where
            else str(first.get("msg", "invalid request body"))
        )
        if len(problems) > 1:
            message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
        return bad_request(message + ". See /docs for the request schema.", param=where or None).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if error.status_code == 404 else "invalid_request_error"
        message = (
            f"No route {request.method} {request.url.path}; see /docs."
            if error.status_code in (404, 405)
            else str(error.detail)
        )
        return APIError(error.status_code, message, type=kind).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        return APIError(
            500,
            f"Internal error ({type(error).__name__}: {error}); the server log has the traceback.",
            type="server_error",
        ).response()

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

    async def check_api_key(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if options.api_key is None:
            return
        if credentials is None:
            raise APIError(
                401,
                f"No API key: send the header 'Authorization: Bearer <key>' with the key the server "
                f"was started with ({API_KEY_ENV}).",
                code="invalid_api_key",
            )
        if not secrets.compare_digest(credentials.credentials.encode(), options.api_key.encode()):
            raise APIError(
                401, f"Wrong API key: use the key the server was started with ({API_KEY_ENV}).", code="invalid_api_key"
            )

    async def encode(texts: list[str], instructions: list[str | None], kind: str):
        try:
            return await state.batcher.submit(texts, instructions, kind)
        except (QueueFullError, BatcherClosedError) as error:
            raise unavailable(str(error)) from None
        except InstEmbError as error:
            raise bad_request(str(error)) from None

    # ------------------------------------------------------------------ endpoints
    @app.post(
        "/v1/embeddings",
        response_model=EmbeddingResponse,
        responses=ERROR_RESPONSES,
        tags=["embeddings"],
        dependencies=[Depends(check_api_key)],
    )
    async def create_embeddings(body: EmbeddingRequest) -> JSONResponse:
        """Embed `input` (a string or a list) under `instruction` (one for all, or one per input)."""
        check_model(body.model)
        texts = input_texts(body.input, options)
        instructions = per_input_instructions(body.instruction, len(texts), options)
        if body.dimensions is not None and body.dimensions != state.encoder.dimension:
            raise bad_request(
                f"dimensions={body.dimensions}, but this model's embeddings have "
                f"{state.encoder.dimension} dimensions; leave dimensions out or send "
                f"{state.encoder.dimension}.",
                param="dimensions",
            )
        result = await encode(texts, instructions, body.input_type)
        data = [
            {"object": "embedding", "index": i, "embedding": encode_vector(vector, body.encoding_format)}
            for i, vector in enumerate(result.vectors)
        ]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": options.model_id,
                "usage": {"prompt_tokens": result.tokens, "total_tokens": result.tokens},
            }
        )

    @app.post(
        "/v1/search",
        response_model=SearchResponse,
        responses=ERROR_RESPONSES,
        tags=["search"],
        dependencies=[Depends(check_api_key)],
    )
    async def search(body: SearchRequest) -> JSONResponse:
        """Top-k chunks of the index for `query` under `instruction` (same JSON as `instemb-rag query --json`)."""
        if state.index is None:
            raise APIError(
                404,
                "This server has no index: start it with --index-dir DIR (a folder built by "
                "`instemb-rag index`), or use /v1/embeddings.",
                type="not_found_error",
                code="no_index",
            )
        check_search(body, options)
        result = await encode([body.query], [body.instruction], "query")
        try:
            hits = await state.on_index_thread(state.index.search, result.vectors[0], None, body.k, body.filter or None)
        except BadInputError as error:
            raise bad_request(str(error)) from None
        except IndexBusyError as error:
            raise unavailable(str(error)) from None
        except InstEmbError as error:
            raise APIError(500, str(error), type="server_error") from None
        return JSONResponse(
            {"query": body.query, "instruction": body.instruction, "hits": [hit.to_dict() for hit in hits]}
        )

    @app.get(
        "/v1/models",
        response_model=ModelList,
        responses=ERROR_RESPONSES,
        tags=["models"],
        dependencies=[Depends(check_api_key)],
    )
    async def list_models() -> dict:
        return {"object": "list", "data": [model_card()]}

    @app.get(
        "/v1/models/{model_id}",
        response_model=ModelCard,
        responses=ERROR_RESPONSES,
        tags=["models"],
        dependencies=[Depends(check_api_key)],
    )
    async def get_model(model_id: str) -> dict:
        check_model(model_id)
        return model_card()

    @app.get("/health", response_model=Health, tags=["health"])
    async def health() -> dict:
        """Liveness and load: no API key needed."""
        index = None
        if state.index is not None:
            chunks = await state.on_index_thread(state.index.catalog.chunk_count)
            index = {"index_dir": str(state.index.index_dir), "store": state.index.manifest.store, "chunks": chunks}
        batcher = state.batcher
        return {
            "status": "shutting_down" if batcher.closed else "ok",
            "model": options.model_id,
            "dimension": state.encoder.dimension,
            "fingerprint": state.encoder.fingerprint,
            "in_flight": state.in_flight,
            "index": index,
            "batching": {
                "enabled": batcher.options.enabled,
                "max_batch_size": batcher.options.max_batch_size,
                "max_wait_ms": batcher.options.max_wait_ms,
                "max_queue": batcher.options.max_queue,
                "queued_inputs": batcher.queued_inputs,
                "forward_batches": batcher.forward_batches,
                "inputs_embedded": batcher.inputs_embedded,
                "largest_batch": batcher.largest_batch,
            },
        }

    def model_card() -> dict:
        encoder = state.encoder
        return {
            "id": options.model_id,
            "object": "model",
            "created": state.created,
            "owned_by": "instemb-rag",
            "dimension": encoder.dimension,
            "fingerprint": encoder.fingerprint,
            "max_length": encoder.max_length,
        }

    def check_model(model: str | None) -> None:
        if model is not None and model != options.model_id:
            raise APIError(
                404,
                f"The model '{model}' is not served here; this server serves '{options.model_id}' "
                "(GET /v1/models). Send that id, or leave model out.",
                type="not_found_error",
                param="model",
                code="model_not_found",
            )

    return app


# ------------------------------------------------------------------ request checks


def input_texts(value: Any, options: ServeOptions) -> list[str]:
    """`input` as a list of non-empty strings within the limits (413 for size, 400 otherwise)."""
    texts = [value] if isinstance(value, str) else list(value)
    if not texts:
        raise bad_request("input is an empty list: send at least one string.", param="input")
    if len(texts) > options.max_inputs:
        raise too_large(
            f"input has {len(texts)} items; this server takes at most {options.max_inputs} per request "
            "(--max-inputs). Split it into several requests.",
            param="input",
        )
    for position, text in enumerate(texts):
        if isinstance(text, (int, list)):
            raise bad_request(
                "input holds token ids: this server embeds text only (its tokenizer is not "
                "OpenAI's); send the strings themselves.",
                param="input",
                code="token_input_unsupported",
            )
        if not isinstance(text, str):
            raise bad_request(f"input[{position}] is {type(text).__name__}, not a string.", param="input")
        if not text.strip():
            raise bad_request(f"input[{position}] is empty: every input needs some text.", param="input")
        if len(text) > options.max_chars:
            raise too_large(
                f"input[{position}] has {len(text):,} characters; this server takes at most "
                f"{options.max_chars:,} per input (--max-chars). Split the text into chunks.",
                param="input",
            )
    return texts


def per_input_instructions(value: Any, count: int, options: ServeOptions) -> list[str | None]:
    """One instruction per input: a single string applies to all; null or '' means none."""
    if value is None or isinstance(value, str):
        instructions = [value or None] * count
    else:
        if len(value) != count:
            raise bad_request(
                f"instruction is a list of {len(value)}, but input has {count} items: give one "
                "instruction per input, a single string for all, or leave it out.",
                param="instruction",
            )
        instructions = [item or None for item in value]
    for position, instruction in enumerate(instructions):
        if instruction is not None and len(instruction) > options.max_chars:
            raise too_large(
                f"instruction #{position} has {len(instruction):,} characters; at most "
                f"{options.max_chars:,} (--max-chars).",
                param="instruction",
            )
    return instructions


def check_search(body: SearchRequest, options: ServeOptions) -> None:
    if not body.query.strip():
        raise bad_request("query is empty: give the text to search for.", param="query")
    if body.instruction is not None and not body.instruction.strip():
        raise bad_request("instruction is empty: leave it out (or null) or give an instruction.", param="instruction")
    for name, text in (("query", body.query), ("instruction", body.instruction or "")):
        if len(text) > options.max_chars:
            raise too_large(
                f"{name} has {len(text):,} characters; at most {options.max_chars:,} (--max-chars).", param=name
            )
    if not 1 <= body.k <= options.max_k:
        raise bad_request(f"k={body.k}: ask for between 1 and {options.max_k} hits (--max-k).", param="k")
    for key, pattern in (body.filter or {}).items():
        if key not in FILTER_KEYS:
            raise bad_request(
                f"filter key '{key}' is unknown; filterable keys: {', '.join(FILTER_KEYS)} "
                '(e.g. {"source": "tents/*.md"}).',
                param="filter",
            )
        if not pattern.strip():
            raise bad_request(f"filter['{key}'] is empty: give a value or glob, e.g. \"tents/*.md\".", param="filter")


def encode_vector(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":
        return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector.tolist()


def _version() -> str:
    from .. import __version__

    return __version__
