"""The one place errors on the Messages API's routes take Anthropic's shape, whichever layer answered them.

Keys, body sizes and tenants' rate limits are refused by middleware before any route runs, invalid bodies by
the exception handlers, and everything else by the routes, all in OpenAI's shape; this middleware, outside
them all, rewrites each such JSON error body on /v1/messages and the routes under it, keeping its status and
headers. An exception nothing answered (a bug) is answered here as the last-resort handler would answer it,
so that its 500 takes the same shape. A stream's error events are the reply builder's own, already in
Anthropic's shape.
"""
from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autoglm.server.anthropic.errors import anthropic_error, speaks_anthropic
from autoglm.server.openai.errors import to_api_error


class AnthropicErrorShapeMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not speaks_anthropic(scope["path"]):
            await self.app(scope, receive, send)
            return
        started = False
        held: Message | None = None  # an error's start, sent once its whole body is in and reshaped
        body = bytearray()

        async def reshaping_send(message: Message) -> None:
            nonlocal started, held
            if message["type"] == "http.response.start":
                started = True
                if message["status"] >= 400 and _is_json(message["headers"]):
                    held = message
                    return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False):
                return
            start, reshaped = _reshaped(held, bytes(body))
            await send(start)
            await send({"type": "http.response.body", "body": reshaped})

        try:
            await self.app(scope, receive, reshaping_send)
        except Exception as error:
            if started:
                raise
            await to_api_error(error).to_response()(scope, receive, reshaping_send)  # logs the traceback


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name.lower() == b"content-type" and value.startswith(b"application/json") for name, value in headers)


def _reshaped(start: Message, body: bytes) -> tuple[Message, bytes]:
    """The answer in Anthropic's shape; as it came when its body is no OpenAI error (a HEAD answer has none)."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, TypeError, KeyError):
        return start, body
    reshaped = anthropic_error(start["status"], str(message)).model_dump_json().encode()
    headers = [(name, value) for name, value in start["headers"] if name.lower() != b"content-length"]
    headers.append((b"content-length", str(len(reshaped)).encode()))
    return {**start, "headers": headers}, reshaped
