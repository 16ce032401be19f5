"""The client's id of a request, echoed in an x-request-id header on every answer and written in its log line.

A client (or a proxy in front of the server) sends its own id in the x-request-id header, or as vLLM's
`request_id` field of a generation request; a request without one gets a made-up id. Either way it
only labels the request for the client and the logs: the engine numbers requests itself, so a retry
sending the same id again is an ordinary request.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = b"x-request-id"
# Where the id is kept in the request's state, for the route and its log line.
_STATE_KEY = "client_request_id"


@dataclass
class ClientRequestId:
    value: str
    from_header: bool  # the client's header takes precedence over a request_id field


def client_request_id(request: Request) -> str | None:
    """The id the answer to `request` will carry; None outside the middleware (a bare app)."""
    held = request.scope.get("state", {}).get(_STATE_KEY)
    return held.value if held is not None else None


def adopt_request_id(request: Request, request_id: str | None) -> None:
    """Take a generation request's `request_id` field as its id, unless its x-request-id header gave one."""
    held = request.scope.get("state", {}).get(_STATE_KEY)
    if held is not None and request_id is not None and not held.from_header:
        held.value = request_id


class RequestIdMiddleware:
    """Puts the request's id in its state and an x-request-id header on its answer, whatever answers it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((value for name, value in scope["headers"] if name == HEADER), None)
        held = ClientRequestId(given.decode("latin-1") if given is not None else uuid.uuid4().hex, given is not None)
        scope.setdefault("state", {})[_STATE_KEY] = held

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (HEADER, held.value.encode("latin-1"))]
            await send(message)

        await self.app(scope, receive, send_with_id)
