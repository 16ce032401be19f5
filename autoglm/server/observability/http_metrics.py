"""Every HTTP answer counted by route and status, refusals at the door (400, 413) and server errors included.

The route is the matched route's path template, so the label set stays small whatever URLs
clients send; a URL no route serves is counted as 'unmatched'. This middleware sits outside the
others, so it sees their refusals; an exception no handler answered is counted as the 500
Starlette answers it with.
"""
from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autoglm.server.observability.metrics import ServerMetrics

UNMATCHED_ROUTE = "unmatched"


def route_label(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The path of the route that served `scope`; for a request refused before routing, of the one it asked for."""
    served = scope.get("route")  # set by the router once it has chosen
    return getattr(served or _route_for(scope, routes), "path", UNMATCHED_ROUTE)


def _route_for(scope: Scope, routes: Sequence[BaseRoute]) -> BaseRoute | None:
    """The route serving `scope`'s method and path, else one serving its path with another method (a 405)."""
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
        if match is Match.PARTIAL and partial is None:
            partial = route
    return partial


class HTTPMetricsMiddleware:
    """Counts each answered HTTP request in `metrics` by its route: the one the router chose, else the one of
    `routes` it asked for."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: int | None = None

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        except Exception:
            status = status or HTTPStatus.INTERNAL_SERVER_ERROR
            raise
        finally:
            if status is not None:  # else the client left before any answer
                self.metrics.count_http_request(route_label(scope, self.routes), status)
