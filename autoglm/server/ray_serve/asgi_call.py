"""One HTTP request through an ASGI app in this process, its body read already, its answer as messages.

An engine replica gets a request's scope and body from the ingress (not a connection), runs the
server's FastAPI app on them, and hands back what the app sends, message by message, so a stream
flows as it is produced. When the caller stops reading (its client went away), the app is told
the client disconnected, as uvicorn would tell it, and ends the request its own way.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from starlette.types import ASGIApp, Message, Scope

logger = logging.getLogger(__name__)

# Requests whose caller left, held until their app call has ended (a task nobody holds may be collected).
_ABANDONED: set[asyncio.Task[None]] = set()


async def call_asgi(app: ASGIApp, scope: Scope, body: bytes) -> AsyncIterator[Message]:
    """Every message `app` sends for the request; raises what the app raised if it sent no response start."""
    sent: asyncio.Queue[Message | None] = asyncio.Queue()
    caller_gone = asyncio.Event()
    body_given = False

    async def receive() -> Message:
        nonlocal body_given
        if not body_given:
            body_given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await caller_gone.wait()
        return {"type": "http.disconnect"}

    call = asyncio.ensure_future(app(scope, receive, sent.put))
    call.add_done_callback(lambda _: sent.put_nowait(None))
    started = False
    try:
        while (message := await sent.get()) is not None:
            started = started or message["type"] == "http.response.start"
            yield message
        if (error := call.exception()) is not None:
            if not started:
                raise error
            logger.error("the app failed after answering %s", scope.get("path"), exc_info=error)
    finally:
        caller_gone.set()
        if not call.done():
            _ABANDONED.add(call)
            call.add_done_callback(_ABANDONED.discard)
