"""The endpoints a batch line may name, in one place: those of OpenAI's Batch API that generate text, and its
embeddings (served by a pooling model).

A line runs on its own url, whatever the batch's `endpoint` says (OpenAI requires every line to match it).
An endpoint of this list that the app does not mount (a server built without it) is refused as not
served; one the app mounts runs, with nothing to change here.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from autoglm.errors import quote_value

BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses", "/v1/embeddings")


@dataclass(frozen=True)
class EndpointProblem:
    code: str
    message: str


@dataclass(frozen=True)
class BatchEndpoints:
    """The batch endpoints this app serves."""

    served: tuple[str, ...]

    @classmethod
    def of_routes(cls, routes: Iterable[BaseRoute]) -> BatchEndpoints:
        posted = {route.path for route in routes if isinstance(route, APIRoute) and "POST" in route.methods}
        return cls(tuple(endpoint for endpoint in BATCH_ENDPOINTS if endpoint in posted))

    def problem(self, url: object) -> EndpointProblem | None:
        """Why a batch may not send requests to `url`; None when it may."""
        if url in self.served:
            return None
        if url in BATCH_ENDPOINTS:
            return EndpointProblem("unsupported_endpoint", f"{url} is not served by this server; its batches may "
                                                           f"name {self._served_names()}")
        return EndpointProblem("invalid_url", f"{quote_value(url)} is not an endpoint a batch may name; allowed: "
                                              f"{self._served_names()}")

    def _served_names(self) -> str:
        return ", ".join(self.served) or "none (this server mounts no batch endpoint)"
