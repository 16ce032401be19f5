"""Every failure answered in OpenAI's error shape, so clients raise their usual exceptions.

``{"error": {"message", "type", "param", "code"}}`` with the HTTP status a client branches on;
no request, however malformed, gets a stack trace or FastAPI's 422.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute

from autoglm.engine.errors import ContextLengthExceededError
from autoglm.errors import (
    MAX_QUOTED_CHARS,
    InvalidRequestError,
    LoRAAdapterNotFoundError,
    LoRACapacityError,
    quote_value,
)
from autoglm.engine.async_engine import EngineDeadError, EngineStepError, QueueFullError, RequestTimeoutError
from autoglm.server.openai.protocol import INVALID_TEXT, UNKNOWN_FIELD
from autoglm.server.openai.unknown_routes import allowed_methods, route_error_message

logger = logging.getLogger(__name__)

# Seconds a client told 429 should wait before retrying.
RETRY_AFTER_S = 1
# OpenAI's error type for each status; people read it, clients branch on the status.
_ERROR_TYPES = {
    HTTPStatus.BAD_REQUEST: "invalid_request_error",
    HTTPStatus.UNAUTHORIZED: "invalid_request_error",
    HTTPStatus.FORBIDDEN: "invalid_request_error",
    HTTPStatus.NOT_FOUND: "invalid_request_error",
    HTTPStatus.METHOD_NOT_ALLOWED: "invalid_request_error",
    HTTPStatus.REQUEST_TIMEOUT: "timeout_error",
    HTTPStatus.CONFLICT: "invalid_request_error",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "invalid_request_error",
    HTTPStatus.UNPROCESSABLE_ENTITY: "invalid_request_error",
    HTTPStatus.TOO_MANY_REQUESTS: "rate_limit_error",
    HTTPStatus.GATEWAY_TIMEOUT: "timeout_error",
}


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorInfo


class APIError(Exception):
    """A failure with the HTTP status and OpenAI error fields it is answered with."""

    def __init__(self, status: HTTPStatus, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None, error_type: str | None = None) -> None:
        """`error_type` replaces the status's usual type, as OpenAI's rate limits say 'requests' or 'tokens'."""
        super().__init__(message)
        self.status = status
        self.body = ErrorResponse(error=ErrorInfo(
            message=message, type=error_type or _ERROR_TYPES.get(status, "server_error"), param=param, code=code,
        ))
        self.headers = headers

    def to_response(self) -> JSONResponse:
        return JSONResponse(self.body.model_dump(), status_code=self.status, headers=self.headers)


def to_api_error(error: BaseException, request_id: str | None = None) -> APIError:
    """The answer for any failure while serving request `request_id`.

    Only input the caller got wrong (InvalidRequestError) is a 4xx; an exception nobody expected
    is a server bug: a 500 naming the request, with its traceback in the log.
    """
    if isinstance(error, APIError):
        return error
    if isinstance(error, ContextLengthExceededError):
        return APIError(HTTPStatus.BAD_REQUEST, str(error), param=error.param, code="context_length_exceeded")
    if isinstance(error, LoRAAdapterNotFoundError):  # an adapter not loaded, or unloading
        return APIError(HTTPStatus.NOT_FOUND, str(error), param=error.param or "model", code="model_not_found")
    if isinstance(error, InvalidRequestError):
        return APIError(HTTPStatus.BAD_REQUEST, str(error), param=error.param, code="invalid_value")
    if isinstance(error, LoRACapacityError):
        return APIError(HTTPStatus.SERVICE_UNAVAILABLE, str(error), code="lora_capacity_exceeded",
                        headers={"Retry-After": str(RETRY_AFTER_S)})
    if isinstance(error, QueueFullError):
        return APIError(HTTPStatus.TOO_MANY_REQUESTS, str(error), code="rate_limit_exceeded",
                        headers={"Retry-After": str(RETRY_AFTER_S)})
    if isinstance(error, RequestTimeoutError):
        return APIError(HTTPStatus.GATEWAY_TIMEOUT, str(error), code="request_timeout")
    if isinstance(error, EngineDeadError):
        return APIError(HTTPStatus.SERVICE_UNAVAILABLE, str(error), code="engine_not_running")
    if isinstance(error, EngineStepError):  # the engine thread logged its traceback
        return APIError(HTTPStatus.INTERNAL_SERVER_ERROR, _server_bug(request_id, str(error)), code="engine_error")
    logger.error("unexpected error while serving request %s", request_id, exc_info=error)
    return APIError(HTTPStatus.INTERNAL_SERVER_ERROR, _server_bug(request_id, f"{type(error).__name__}: {error}"),
                    code="internal_error")


def _server_bug(request_id: str | None, detail: str) -> str:
    subject = f"request {request_id}" if request_id is not None else "the request"
    return (f"internal server error while serving {subject} ({detail}); this is a bug in the server, "
            f"and its log holds the traceback")


def _validation_error(error: RequestValidationError) -> APIError:
    """The first problem pydantic found, as one sentence naming the field."""
    problems = error.errors()
    problem = problems[0]
    if problem["type"] == "json_invalid":
        detail = problem.get("ctx", {}).get("error", problem["msg"])
        return APIError(HTTPStatus.BAD_REQUEST, f"the request body is not valid JSON: {detail}", code="invalid_json")
    locs = [tuple(part for part in p["loc"] if part != "body") for p in problems]
    loc = locs[0]
    if problem["type"] == UNKNOWN_FIELD:
        return _unknown_field_error(loc, problem)
    if problem["type"] == INVALID_TEXT:
        return _invalid_text_error((*loc, *problem["ctx"]["path"]))
    if problem["type"] == "value_error" and isinstance(problem["ctx"]["error"], InvalidRequestError) \
            and problem["ctx"]["error"].param is not None:
        return _named_field_error(loc, problem["ctx"]["error"])
    if not loc and problem["type"] in ("model_type", "model_attributes_type"):
        return APIError(HTTPStatus.BAD_REQUEST, f"the request body must be a JSON object, got "
                        f"{_json_kind(problem['input'])}", code="invalid_type")
    if not loc:
        return APIError(HTTPStatus.BAD_REQUEST, f"invalid request body: {_reason(problem)}", code="invalid_value")
    field_loc = loc[:next((i for i, part in enumerate(loc) if _is_union_member(part)), len(loc))]
    path = ".".join(str(part) for part in field_loc)
    if field_loc == loc:
        message = f"{path}: {_reason(problem)}"
    else:
        # pydantic tried each type the field accepts; name them instead of the last one's complaint.
        depth = len(field_loc)
        members = [str(other[depth]) for other in locs if other[:depth] == field_loc and len(other) > depth]
        message = f"{path}: expected {' or '.join(dict.fromkeys(members))}"
    if problem["type"] == "missing":
        return APIError(HTTPStatus.BAD_REQUEST, message, param=str(loc[0]), code="missing_required_parameter")
    message += f" (got {quote_value(problem['input'])})"
    code = "invalid_value" if problem["type"] == "value_error" else "invalid_type"
    return APIError(HTTPStatus.BAD_REQUEST, message, param=str(loc[0]), code=code)


def _unknown_field_error(loc: tuple[int | str, ...], problem: ErrorDetails) -> APIError:
    """Named by its full path (``messages.0.nmae``), with the closest declared name when one is close."""
    field = ".".join(str(part) for part in (*loc, problem["ctx"]["field"]))
    message = f"unknown parameter {quote_value(field)}"
    if problem["ctx"]["closest"] is not None:
        message += f"; did you mean '{problem['ctx']['closest']}'?"
    # An unknown top-level name is the param; like the message, it keeps only a prefix of a huge one.
    param = str(loc[0]) if loc else field[:MAX_QUOTED_CHARS]
    return APIError(HTTPStatus.BAD_REQUEST, message, param=param, code="unknown_parameter")


def _invalid_text_error(path: tuple[int | str, ...]) -> APIError:
    """Named by the path to the text, never quoting it: a lone surrogate cannot be written as UTF-8."""
    field = ".".join(str(part) for part in path) or "the request body"
    return APIError(HTTPStatus.BAD_REQUEST,
                    f"{field}: text must be valid Unicode, but it holds a lone surrogate (an unpaired "
                    f"\\ud800-\\udfff escape)", param=str(path[0]) if path else None, code="invalid_value")


def _named_field_error(loc: tuple[int | str, ...], error: InvalidRequestError) -> APIError:
    """A model's check that names its field at fault (a tool message's tool_call_id), named by the
    field's whole path in OpenAI's style, ``messages[2].tool_call_id``, both as the param and in the message."""
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in (*loc, error.param))
    param = path.removeprefix(".")
    return APIError(HTTPStatus.BAD_REQUEST, f"{param}: {error}", param=param, code="invalid_value")


def _json_kind(value: object) -> str:
    """What a parsed JSON value is, in JSON's words."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def _reason(problem: ErrorDetails) -> str:
    return str(problem["ctx"]["error"]) if problem["type"] == "value_error" else problem["msg"]


_SCALAR_TYPE_NAMES = frozenset({"str", "int", "float", "bool"})


def _is_union_member(part: int | str) -> bool:
    """pydantic names each member of a union in the error location: 'str', 'list[int]', 'TextContentPart'."""
    return isinstance(part, str) and (part in _SCALAR_TYPE_NAMES or "[" in part or part[:1].isupper())


def install_error_handlers(app: FastAPI, routes: Sequence[BaseRoute] = ()) -> None:
    """Route every failure FastAPI and Starlette know about to an OpenAI-shaped answer; a 405 allows the methods
    of every one of `routes` that serves its path."""

    async def api_error(_: Request, error: Exception) -> JSONResponse:
        return to_api_error(error).to_response()

    async def invalid_request(_: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        return _validation_error(error).to_response()

    async def http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        status = HTTPStatus(error.status_code)
        message, code, headers = str(error.detail), None, error.headers
        if status in (HTTPStatus.NOT_FOUND, HTTPStatus.METHOD_NOT_ALLOWED):
            message, code = route_error_message(status, request.method, request.url.path)
        if status == HTTPStatus.METHOD_NOT_ALLOWED and routes:
            headers = {**(headers or {}), "Allow": allowed_methods(request.scope, routes)}
        return APIError(status, message, code=code, headers=headers).to_response()

    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for known in (APIError, InvalidRequestError, QueueFullError, RequestTimeoutError, EngineDeadError, EngineStepError):
        app.add_exception_handler(known, api_error)
    # The last resort: Starlette answers with it, then re-raises so the server logs the trace.
    app.add_exception_handler(Exception, api_error)
