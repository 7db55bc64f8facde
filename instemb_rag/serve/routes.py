"""The endpoints of `instemb-rag serve` and the checks of their requests.

    POST /v1/embeddings   OpenAI's embeddings schema + `instruction`, `input_type`, the model's
                          query-time knob (knobs.py)
    POST /v1/search       {query, instruction, k, filter, hybrid, hybrid_weight, the knob,
                          explain} over the index (= `instemb-rag query
                          --json [--hybrid]`)
    GET  /v1/models       the one model served (id, dimension, fingerprints, the documents' limits)
    GET  /health          status, model, batching counters (no API key needed)

Each endpoint reads the server's state (state.py) from the app it is mounted on (``server_state``),
so the routes are plain functions and app.py only wires them. What embeds documents (their
tokenizer's limits, their fingerprint, whether they read an instruction) is the encoder's
``document_side`` (encoder/sides.py), whatever parts the model is made of.
"""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..encoder.protocol import query_knobs
from ..errors import InstEmbError
from ..instructions import per_item_instructions
from ..knobs import KNOBS
from ..queries import QueryKnobs
from .batching import BatcherClosedError, QueueFullError
from .errors import ERROR_RESPONSES, APIError, bad_request, too_large, unavailable
from .schemas import (
    API_KEY_ENV,
    EmbeddingRequest,
    EmbeddingResponse,
    Health,
    ModelCard,
    ModelList,
    SearchRequest,
    SearchResponse,
    encode_vector,
)
from .search import answer_search, body_knobs, check_search, query_request
from .state import ServeOptions, ServerState

__all__ = [
    "check_document_instructions",
    "check_search",
    "answer_search",
    "input_texts",
    "per_input_instructions",
    "router",
    "query_request",
    "search_document",
    "server_state",
]

router = APIRouter()
bearer = HTTPBearer(auto_error=False, description=f"Needed when the server was started with {API_KEY_ENV} set.")


def server_state(request: Request) -> ServerState:
    """The state of the app serving this request (create_app puts it on ``app.state.instemb``)."""
    return request.app.state.instemb


async def check_api_key(
    credentials: HTTPAuthorizationCredentials | None = Depends(bearer), state: ServerState = Depends(server_state)
) -> None:
    options = state.options
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


async def encode(
    state: ServerState,
    texts: list[str],
    instructions: list[str | None],
    kind: str,
    knobs: QueryKnobs = QueryKnobs(),
):
    try:
        return await state.batcher.submit(texts, instructions, kind, knobs)
    except (QueueFullError, BatcherClosedError) as error:
        raise unavailable(str(error)) from None
    except InstEmbError as error:
        raise bad_request(str(error)) from None


@router.post(
    "/v1/embeddings",
    response_model=EmbeddingResponse,
    responses=ERROR_RESPONSES,
    tags=["embeddings"],
    dependencies=[Depends(check_api_key)],
)
async def create_embeddings(body: EmbeddingRequest, state: ServerState = Depends(server_state)) -> JSONResponse:
    """Embed `input` (a string or a list) under `instruction` (one for all, or one per input);
    queries under the model's query-time knob (GET /v1/models lists it)."""
    options = state.options
    check_model(state.options, body.model)
    texts = input_texts(body.input, options)
    instructions = per_input_instructions(body.instruction, len(texts), options)
    if body.dimensions is not None and body.dimensions != state.encoder.dimension:
        raise bad_request(
            f"dimensions={body.dimensions}, but this model's embeddings have "
            f"{state.encoder.dimension} dimensions; leave dimensions out or send "
            f"{state.encoder.dimension}.",
            param="dimensions",
        )
    if body.input_type == "document":
        check_document_instructions(state.encoder, instructions)
        for knob in body_knobs(body):
            raise bad_request(
                f"{knob} is a query's knob; documents are stored with both halves and take none. "
                'Send it with "input_type": "query" (or leave it out).',
                param=knob,
            )
    # In range (the request schema); a knob the model lacks: KnobError, a 400 (errors.py).
    knobs = body_knobs(body).require(state.encoder)
    result = await encode(state, texts, instructions, body.input_type, knobs)
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


@router.post(
    "/v1/search",
    response_model=SearchResponse,
    responses=ERROR_RESPONSES,
    tags=["search"],
    dependencies=[Depends(check_api_key)],
)
async def search(body: SearchRequest, state: ServerState = Depends(server_state)) -> JSONResponse:
    """Top-k chunks of the index for `query` under `instruction` (same JSON as `instemb-rag query --json`)."""
    return JSONResponse(await search_document(body, state))


async def search_document(body: SearchRequest, state: ServerState, notes: list[str] | None = None) -> dict:
    """The /v1/search answer for ``body`` over ``state``'s index: the query service's
    (``ServerState.answer``), after the server's own limits (``check_search``); ``notes`` receives
    the notices for the user (serve/notices.py)."""
    answer = await answer_search(body, state)
    if notes is not None:
        notes.extend(answer.notes)
    return answer.to_document()


@router.get(
    "/v1/models",
    response_model=ModelList,
    responses=ERROR_RESPONSES,
    tags=["models"],
    dependencies=[Depends(check_api_key)],
)
async def list_models(state: ServerState = Depends(server_state)) -> dict:
    return {"object": "list", "data": [model_card(state)]}


@router.get(
    "/v1/models/{model_id}",
    response_model=ModelCard,
    responses=ERROR_RESPONSES,
    tags=["models"],
    dependencies=[Depends(check_api_key)],
)
async def get_model(model_id: str, state: ServerState = Depends(server_state)) -> dict:
    check_model(state.options, model_id)
    return model_card(state)


@router.get("/health", response_model=Health, tags=["health"])
async def health(state: ServerState = Depends(server_state)) -> dict:
    """Liveness and load: no API key needed."""
    options = state.options
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


def model_card(state: ServerState) -> dict:
    """The served model; the documents' limits are its document side's (the most restrictive part:
    a sentence encoder's window where one embeds documents, not the LLM's)."""
    encoder, options = state.encoder, state.options
    side = encoder.document_side
    return {
        "id": options.model_id,
        "object": "model",
        "created": state.created,
        "owned_by": "instemb-rag",
        "dimension": encoder.dimension,
        "fingerprint": encoder.fingerprint,
        "max_length": side.max_length,
        "document_token_limit": side.token_limit,
        "document_fingerprint": side.fingerprint,
        "document_model": side.description,
        "document_instruction": side.reads_instruction,
        "query_max_length": encoder.max_length,
        **knob_cards(encoder),
    }


def knob_cards(encoder: Any) -> dict[str, dict | None]:
    """The model card's knobs, from their declarations (knobs.py): None for one the model lacks, else
    the value a query gets when a request gives none (None: the model sets one per query, e.g. a
    two-space model's gate) and the range."""
    taken, default_of = query_knobs(encoder), getattr(encoder, "knob_default", None)
    return {
        knob.name: {
            "default": default_of(knob.name) if default_of else getattr(encoder, knob.name, None),
            "minimum": knob.low,
            "maximum": knob.high,
        }
        if knob.name in taken
        else None
        for knob in KNOBS.values()
    }


def check_model(options: ServeOptions, model: str | None) -> None:
    if model is not None and model != options.model_id:
        raise APIError(
            404,
            f"The model '{model}' is not served here; this server serves '{options.model_id}' "
            "(GET /v1/models). Send that id, or leave model out.",
            type="not_found_error",
            param="model",
            code="model_not_found",
        )


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
    """One instruction per input (instructions.per_item_instructions): a single string applies to
    all; null, "" or whitespace means none."""
    try:
        instructions = per_item_instructions(value, count, field="instruction", texts="inputs")
    except InstEmbError as error:
        raise bad_request(str(error), param="instruction") from None
    for position, instruction in enumerate(instructions):
        if instruction is not None and len(instruction) > options.max_chars:
            raise too_large(
                f"instruction #{position} has {len(instruction):,} characters; at most "
                f"{options.max_chars:,} (--max-chars).",
                param="instruction",
            )
    return instructions


def check_document_instructions(encoder: Any, instructions: list[str | None]) -> None:
    """Where a sentence encoder embeds documents (a two-tower or two-space model's document side),
    nothing reads a document instruction: it is refused here (400), before the request joins a
    batch (where its error would fail the other requests of that batch too)."""
    side = encoder.document_side
    for instruction in instructions:
        try:
            side.refuse_instruction(instruction)
        except InstEmbError as error:
            raise bad_request(str(error), param="instruction", code="document_instruction_unsupported") from None
