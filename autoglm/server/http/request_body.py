"""Each request body read whole at the door, within a size limit, a deadline and a nesting depth,
before the app sees it.

A body past the limit is answered 413 without reading it further: at once when Content-Length
declares it, else as soon as the chunks received pass it. A body that does not arrive within the
deadline (a client trickling bytes to hold a connection) is answered 408 and its connection
closed. Only reading the body is timed: once it is in, the app's own reads (a streamed response
listening for the client's disconnect) wait as long as the response lasts. A body that nests
arrays and objects past MAX_JSON_DEPTH is answered 400 before anything parses it (json_nesting.py).
An upload route (a file for the Batch API) has a limit of its own, and its body, a form holding a
file rather than JSON, is not scanned for nesting.
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autoglm.server.openai.errors import APIError
from autoglm.server.http.json_nesting import nesting_error


class _BodyTooLarge(Exception):
    pass


@dataclass(frozen=True)
class BodyLimit:
    """The most bytes a body may hold, and the setting a 413 names."""

    max_bytes: int
    setting: str


class RequestBodyMiddleware:
    """Reads the body of every HTTP request under `max_bytes` and `read_timeout_s`, then replays it to the app;
    a path of `uploads` takes a body within its own limit."""

    def __init__(self, app: ASGIApp, max_bytes: int, read_timeout_s: float,
                 uploads: Mapping[str, BodyLimit] | None = None) -> None:
        self.app = app
        self.limit = BodyLimit(max_bytes, "max_request_body_bytes")
        self.read_timeout_s = read_timeout_s
        self.uploads = dict(uploads or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = self.uploads.get(scope["path"])
        limit = upload or self.limit
        declared = _content_length(scope)
        if declared is not None and declared > limit.max_bytes:
            await _too_large(declared, limit).to_response()(scope, receive, send)
            return
        try:
            body = await asyncio.wait_for(self._read_body(receive, limit.max_bytes), self.read_timeout_s)
        except _BodyTooLarge:
            await _too_large(None, limit).to_response()(scope, receive, send)
            return
        except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11 on
            await self._too_slow().to_response()(scope, receive, send)
            return
        if body is None:  # the client left before sending it all
            return
        too_deep = nesting_error(body) if upload is None else None
        if too_deep is not None:
            await too_deep.to_response()(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_body(self, receive: Receive, max_bytes: int) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_slow(self) -> APIError:
        return APIError(HTTPStatus.REQUEST_TIMEOUT,
                        f"the request body did not arrive within {self.read_timeout_s:g} s "
                        f"(setting body_read_timeout_s); the connection is closed",
                        code="request_timeout", headers={"Connection": "close"})


def _too_large(declared: int | None, limit: BodyLimit) -> APIError:
    size = f"{declared} bytes" if declared is not None else "more"
    return APIError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    f"the request body is {size}; this server takes at most {limit.max_bytes} bytes "
                    f"(setting {limit.setting})", code="request_too_large")


def _content_length(scope: Scope) -> int | None:
    """The declared body size; the HTTP parser has already refused a malformed one."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value)
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the whole body once, then whatever the connection says next (its disconnect)."""
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
