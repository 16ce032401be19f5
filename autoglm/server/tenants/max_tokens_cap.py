"""A tenant's cap on the completion tokens one request may ask for (limits.max_tokens_cap)."""
from __future__ import annotations

from http import HTTPStatus
from typing import TypeVar

from fastapi import Request

from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatCompletionRequest, GenerationRequest
from autoglm.server.tenants.access import request_principal

Body = TypeVar("Body", bound=GenerationRequest)


def capped_max_tokens(request: Request, body: Body) -> Body:
    """`body` within its tenant's cap: asking more is a 400 naming the cap; asking nothing (or a default
    above the cap) gets the cap."""
    principal = request_principal(request)
    if principal is None or principal.tenant.limits.max_tokens_cap is None:
        return body
    cap = principal.tenant.limits.max_tokens_cap
    field = max_tokens_field(body)
    asked: int | None = getattr(body, field)
    if asked is not None and asked <= cap:
        return body
    if asked is not None and field in body.model_fields_set:
        raise APIError(HTTPStatus.BAD_REQUEST,
                       f"{field} is {asked}, above the cap of {cap} tokens per request of tenant "
                       f"'{principal.tenant.id}' (max_tokens_cap); ask for at most {cap}",
                       param=field, code="invalid_value")
    return body.model_copy(update={field: cap})


def max_tokens_field(body: GenerationRequest) -> str:
    """The field that bounds the completion: chat's max_completion_tokens when set, else max_tokens."""
    if isinstance(body, ChatCompletionRequest) and body.max_completion_tokens is not None:
        return "max_completion_tokens"
    return "max_tokens"
