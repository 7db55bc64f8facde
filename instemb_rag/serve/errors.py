"""Errors of `instemb-rag serve` in OpenAI's shape ({"error": {message, type, param, code}}) with
an HTTP status: ``APIError`` and its common kinds, and the handlers that answer every error so."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..knobs import KnobError
from .schemas import ErrorResponse

__all__ = [
    "ERROR_RESPONSES",
    "APIError",
    "bad_request",
    "install_error_handlers",
    "knob_refused",
    "too_large",
    "unavailable",
]


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


def knob_refused(error: KnobError) -> APIError:
    """A query-time knob out of its range (the request schema's check) or given to a model without
    it (the route's): a 400 naming the field, with the knob's own message (queries.py)."""
    return bad_request(str(error), param=error.knob, code=error.code)


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


def install_error_handlers(app: FastAPI) -> None:
    """Every error answered in OpenAI's shape: {"error": {message, type, param, code}}."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, error: APIError) -> JSONResponse:
        return error.response()

    @app.exception_handler(KnobError)
    async def _knob_error(request: Request, error: KnobError) -> JSONResponse:
        return knob_refused(error).response()

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = error.errors()
        first = problems[0] if problems else {}
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, KnobError):  # a knob out of range: its own words, not pydantic's
            return knob_refused(cause).response()
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
