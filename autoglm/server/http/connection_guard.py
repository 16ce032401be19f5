"""uvicorn's HTTP/1.1 protocol with the two guards it lacks: a deadline for request headers and a connection cap.

uvicorn closes a connection that stays silent after a response (its keep-alive timeout), but
not one that trickles a header byte every few seconds, nor a new one that sends nothing: a
few hundred such clients would hold every socket. Here a request's headers must be complete
within `header_read_timeout_s` of its first byte (of the connection, for its first request),
else the connection is closed. uvicorn's `limit_concurrency` is checked only once a request's
headers are in, so it never sees those clients; the cap here counts open connections as they
are accepted, and answers one past `max_connections` with a 503 in OpenAI's error shape before
closing it. The app guards the body (request_body.py): by then a request is an ASGI call.
"""
from __future__ import annotations

import asyncio
import logging
from http import HTTPStatus
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from autoglm.server.openai.errors import RETRY_AFTER_S, APIError

logger = logging.getLogger(__name__)


class GuardedH11Protocol(H11Protocol):
    """An H11Protocol that refuses connections past `max_connections` and drops slow headers."""

    max_connections: ClassVar[int]
    header_read_timeout_s: ClassVar[float]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            logger.warning("refused a connection from %s: %d are open (setting max_connections)",
                           transport.get_extra_info("peername"), self.max_connections)
            self.transport = transport  # for connection_lost, which is still called
            transport.write(_refusal(self.max_connections))
            transport.close()
            return
        super().connection_made(transport)
        self._start_header_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # part of a request's headers is in
            self._start_header_deadline()
        else:
            self._cancel_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def _start_header_deadline(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_read_timeout_s, self._headers_too_slow)

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            logger.debug("closing a connection from %s whose request headers took over %g s",
                         self.client, self.header_read_timeout_s)
            self.transport.close()


def guarded_protocol(max_connections: int, header_read_timeout_s: float) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn's `http` option, with these limits (uvicorn builds one per connection)."""
    limits = {"max_connections": max_connections, "header_read_timeout_s": header_read_timeout_s}
    return type("GuardedH11Protocol", (GuardedH11Protocol,), limits)


def _refusal(max_connections: int) -> bytes:
    """A whole HTTP response telling the client the server holds as many connections as it takes."""
    error = APIError(HTTPStatus.SERVICE_UNAVAILABLE,
                     f"the server already holds {max_connections} open connections (setting max_connections); "
                     f"retry later", code="too_many_connections")
    body = error.body.model_dump_json().encode()
    head = (f"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nretry-after: {RETRY_AFTER_S}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body
