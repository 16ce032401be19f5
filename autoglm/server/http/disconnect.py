"""Stop work for a client that has gone away, instead of finishing an answer nobody will read."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before its answer was ready."""


async def until_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; cancel it and raise ClientDisconnected if the client disconnects first."""
    work_task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_wait_for_disconnect(request))
    try:
        await asyncio.wait((work_task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not work_task.done():
            work_task.cancel()
            await asyncio.gather(work_task, return_exceptions=True)
    if work_task.cancelled():
        raise ClientDisconnected()
    return work_task.result()


async def _wait_for_disconnect(request: Request) -> None:
    # The body is already read, so the next message the server sends is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass
