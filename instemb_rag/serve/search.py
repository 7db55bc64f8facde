"""/v1/search's answer, for the server and the resident query process: the server's own limits
(``check_search``), the query service's request (``query_request``), and its answer over the
state's index (service/answer.py ``search``: on the index's thread, the query embedded by the
batcher, so concurrent requests share a forward pass), its errors as HTTP errors."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from ..errors import InstEmbError
from ..index.errors import BadInputError, IndexBusyError, IndexFolderError
from ..index.filters import FILTER_KEYS
from ..knobs import KNOBS, KnobError
from ..queries import Query, QueryKnobs
from ..service.answer import Answer, search
from ..service.request import QueryRequest, declared_fields
from .batching import BatcherClosedError, QueueFullError
from .errors import APIError, bad_request, knob_refused, too_large, unavailable
from .schemas import SearchRequest
from .state import ServeOptions, ServerState

__all__ = ["answer", "answer_search", "body_knobs", "check_search", "query_request"]


async def answer_search(body: SearchRequest, state: ServerState) -> Answer:
    """``body`` answered over ``state``'s index, its errors as HTTP errors (the server and the
    resident query process)."""
    if state.index is None:
        raise APIError(
            404,
            "This server has no index: start it with --index-dir DIR (a folder built by "
            "`instemb-rag index`), or use /v1/embeddings.",
            type="not_found_error",
            code="no_index",
        )
    check_search(body, state.options)
    try:
        return await answer(query_request(body), state)
    except (QueueFullError, BatcherClosedError) as error:
        raise unavailable(str(error)) from None
    except KnobError as error:  # a knob the model lacks: a 400 naming the field
        raise knob_refused(error) from None
    except BadInputError as error:
        raise bad_request(str(error)) from None
    except IndexBusyError as error:
        raise unavailable(str(error)) from None
    except IndexFolderError as error:  # e.g. --hybrid on an index built before the full-text index
        raise APIError(409, str(error), type="invalid_request_error", code="index_needs_migration") from None
    except InstEmbError as error:
        raise APIError(500, str(error), type="server_error") from None


def query_request(body: SearchRequest) -> QueryRequest:
    """The query service's request of a /v1/search body: its declared fields and its knobs (in range:
    the request schema checked them)."""
    return QueryRequest(**{spec.name: getattr(body, spec.name) for spec in declared_fields()}, knobs=body_knobs(body))


def body_knobs(body: Any) -> QueryKnobs:
    """A request's knobs (/v1/search's, /v1/embeddings'), as its schema checked them (schemas.py)."""
    return QueryKnobs(**{name: getattr(body, name) for name in KNOBS})


async def answer(request: QueryRequest, state: ServerState) -> Answer:
    """The query service's answer to ``request`` over ``state``'s index, on the index's thread; the
    query is embedded by the state's batcher (with the other requests of its batch)."""
    loop = asyncio.get_running_loop()

    def embed(query: Query):
        submitted = state.batcher.submit([query.text], [query.instruction], "query", query.knobs)
        result = asyncio.run_coroutine_threadsafe(submitted, loop).result()
        return result.vectors[0], list(result.notes)

    # On the index's thread (its SQLite connection's), as ServerState.on_index_thread runs a call.
    return await loop.run_in_executor(state.index_thread, functools.partial(search, request, state.index, embed))


def check_search(body: SearchRequest, options: ServeOptions) -> None:
    if not body.query.strip():
        raise bad_request("query is empty: give the text to search for.", param="query")
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
    if body.hybrid_weight is not None:
        if body.hybrid is None:
            raise bad_request('hybrid_weight needs hybrid: send "hybrid": "rrf" (or "z") too.', param="hybrid_weight")
        if not 0.0 <= body.hybrid_weight <= 1.0:
            raise bad_request(
                f"hybrid_weight={body.hybrid_weight}: give the full-text side's share, between 0 and 1.",
                param="hybrid_weight",
            )
