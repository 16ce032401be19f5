"""A batch line sent to the app it belongs to, in process, as an ordinary request of its tenant.

The request passes every middleware a client's does (request id, metrics, hosts, keys, rate limits,
body limits) and then its route: whatever a route checks, counts or limits applies to each line as it
runs. Who it speaks for, and the priority it runs at, go in its ASGI scope's state, where no client
can put anything: never in a header.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from autoglm.server.batches.line_priority import BATCH_PRIORITY_STATE
from autoglm.server.http.request_ids import HEADER as REQUEST_ID_HEADER
from autoglm.server.tenants.authentication import PRINCIPAL_STATE
from autoglm.server.tenants.keyring import Principal


@dataclass(frozen=True)
class LineAnswer:
    status: int
    request_id: str | None
    body: Any  # the answer's JSON, or its text when it is not JSON
    retry_after_s: float | None  # what a 429 or 503 asked the client to wait


def in_process_host(allowed_hosts: tuple[str, ...]) -> str:
    """A Host the server's allow-list takes, for the lines' requests ('*' patterns filled in)."""
    return allowed_hosts[0].replace("*", "batch", 1)


class LineDispatcher:
    def __init__(self, app: ASGIApp, host: str) -> None:
        self._app = app
        self._base_url = f"http://{host}"

    async def send(self, url: str, body: str, principal: Principal | None, priority: int) -> LineAnswer:
        """POST `body` (JSON text) to `url` as `principal` would, to run at `priority`."""
        state: dict[str, Any] = {BATCH_PRIORITY_STATE: priority}
        if principal is not None:
            state[PRINCIPAL_STATE] = principal
        transport = httpx.ASGITransport(app=_with_state(self._app, state), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=self._base_url, timeout=None) as client:
            answer = await client.post(url, content=body.encode("utf-8"),
                                       headers={"content-type": "application/json"})
        try:
            content = answer.json()
        except ValueError:
            content = answer.text
        return LineAnswer(answer.status_code, answer.headers.get(REQUEST_ID_HEADER.decode()), content,
                          _seconds(answer.headers.get("retry-after")))


def _with_state(app: ASGIApp, state: dict[str, Any]) -> ASGIApp:
    async def scoped(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, "state": dict(state)}, receive, send)

    return scoped


def _seconds(header: str | None) -> float | None:
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None
