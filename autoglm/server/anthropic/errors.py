"""Errors in Anthropic's shape, ``{"type": "error", "error": {"type", "message"}}``, for the Messages API's routes.

The HTTP status stays the one every other route answers with; only the body differs, so that Anthropic's
clients raise their usual exceptions (``anthropic.AuthenticationError`` for a 401, ...).
"""
from __future__ import annotations

from http import HTTPStatus
from typing import Literal

from pydantic import BaseModel

# Where Anthropic's shapes are spoken: /v1/messages and the routes under it.
MESSAGES_PATH = "/v1/messages"
# Anthropic's error type for each status; others are "invalid_request_error" (4xx) or "api_error" (5xx).
_ERROR_TYPES = {
    HTTPStatus.UNAUTHORIZED: "authentication_error",
    HTTPStatus.FORBIDDEN: "permission_error",
    HTTPStatus.NOT_FOUND: "not_found_error",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "request_too_large",
    HTTPStatus.TOO_MANY_REQUESTS: "rate_limit_error",
    HTTPStatus.SERVICE_UNAVAILABLE: "overloaded_error",
}


class AnthropicErrorDetail(BaseModel):
    type: str
    message: str


class AnthropicError(BaseModel):
    type: Literal["error"] = "error"
    error: AnthropicErrorDetail


def speaks_anthropic(path: str) -> bool:
    return path == MESSAGES_PATH or path.startswith(MESSAGES_PATH + "/")


def anthropic_error(status: int, message: str) -> AnthropicError:
    """The body of an error answered with `status`."""
    default = "api_error" if status >= HTTPStatus.INTERNAL_SERVER_ERROR else "invalid_request_error"
    return AnthropicError(error=AnthropicErrorDetail(type=_ERROR_TYPES.get(status, default), message=message))
