"""The deployment Ray's HTTP proxy sends every request to: it picks the routing key, then relays an engine's answer.

Ray's proxy hands a replica the request's headers, not its body, so routing on the prompt has to
happen one hop later: here, with the body read. The request (scope and body) goes on to an engine
replica through a deployment handle, whose request router (request_router.py) reads the key, and
the replica's messages come back as they are sent, streams included. Routing settings aside, this
adds no behaviour of its own: every answer, error or not, is the engine's app's, except when no
engine replica could answer at all, and the admin calls that change a replica's state, which go to
every replica (fan_out.py), one such call at a time.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http import HTTPStatus

from ray.serve.handle import DeploymentHandle, DeploymentResponseGenerator
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from autoglm.server.openai.errors import APIError
from autoglm.server.ray_serve.fan_out import combined_answer, fans_out
from autoglm.server.ray_serve.routing_key import routing_key
from autoglm.server.openai.streaming import sse_event

logger = logging.getLogger(__name__)

# The parts of the proxy's ASGI scope the engine's app reads; nothing the ingress's own framework added.
FORWARDED_SCOPE_KEYS = ("type", "asgi", "http_version", "method", "scheme", "path", "raw_path", "query_string",
                        "root_path", "headers", "client", "server")


@dataclass(frozen=True)
class PrefixRouting:
    """Whether requests carry a routing key, and how many leading prompt characters it holds."""

    enabled: bool
    num_chars: int


def _replica_lost(error: Exception) -> APIError:
    return APIError(HTTPStatus.SERVICE_UNAVAILABLE,
                    f"the engine replica serving this request stopped ({type(error).__name__}); retry the request",
                    code="replica_unavailable")


class Ingress:
    """A deployment class: the HTTP entry of the application."""

    def __init__(self, engines: DeploymentHandle, routing: PrefixRouting) -> None:
        self._every_engine = engines
        self._engines = engines.options(method_name="handle_http", stream=True)
        self._routing = routing
        self._admin_turn = asyncio.Lock()  # two changes at once could each write the tenants file from its old copy

    async def __call__(self, request: Request) -> Response:
        body = await request.body()
        scope = {name: request.scope[name] for name in FORWARDED_SCOPE_KEYS if name in request.scope}
        if fans_out(request.method, request.url.path):
            return await self._on_every_replica(scope, body)
        key = routing_key(request.url.path, body, self._routing.num_chars) if self._routing.enabled else None
        messages: DeploymentResponseGenerator = self._engines.remote(scope, body, routing_key=key)
        try:
            start = await messages.__anext__()
        except Exception as error:  # the replica died or could not be reached: nothing was answered yet
            logger.warning("no answer from an engine replica for %s: %r", request.url.path, error)
            return _replica_lost(error).to_response()
        return RelayedResponse(start, messages)

    async def _on_every_replica(self, scope: Scope, body: bytes) -> Response:
        """The request sent to every running engine replica; answered once each has answered."""
        async with self._admin_turn:
            try:
                outcomes = await self._every_engine.broadcast("answer_whole", scope, body).results_async(
                    return_exceptions=True)
            except Exception as error:  # no replica is running
                logger.warning("no engine replica to send %s to: %r", scope["path"], error)
                return _replica_lost(error).to_response()
        return combined_answer(scope["method"], scope["path"], outcomes)


class RelayedResponse(Response):
    """An engine replica's answer, its start already received, sent on as the rest arrives."""

    def __init__(self, start: Message, rest: AsyncIterator[Message]) -> None:
        self._start = start
        self._rest = rest
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in start["headers"]}
        self._is_event_stream = headers.get("content-type", "").startswith("text/event-stream")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(self._start)
        try:
            async for message in self._rest:
                await send(message)
        except Exception as error:  # the replica died mid-answer: the status has gone out already
            logger.warning("an engine replica stopped mid-answer: %r", error)
            if not self._is_event_stream:
                raise  # the proxy drops the connection: the client sees the answer cut short
            event = sse_event(_replica_lost(error).body.model_dump_json())  # as the server ends a failed stream
            await send({"type": "http.response.body", "body": event.encode(), "more_body": False})
