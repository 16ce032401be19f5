"""What a request for a route this server lacks is told: which OpenAI API it is not, or that the URL is unknown."""
from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from autoglm.errors import quote_value

# OpenAI's APIs beside text generation, by their first path segment under /v1.
OPENAI_APIS_NOT_SERVED = frozenset({
    "assistants", "audio", "containers", "conversations", "evals",
    "fine_tuning", "images", "moderations", "realtime", "threads", "uploads", "vector_stores",
})
SERVED_ROUTES = ("POST /v1/completions, POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, "
                 "POST /v1/embeddings, POST /v1/rerank, POST /v1/score, GET /v1/models, /v1/files, /v1/batches, "
                 "POST /v1/load_lora_adapter and /v1/unload_lora_adapter")


def route_error_message(status: HTTPStatus, method: str, path: str) -> tuple[str, str]:
    """The message and code for a 404 or 405 Starlette raised for `method` `path`."""
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        return f"{method} is not allowed on {quote_value(path)}", "method_not_allowed"
    parts = path.strip("/").split("/")
    if len(parts) > 1 and parts[0] == "v1" and parts[1] in OPENAI_APIS_NOT_SERVED:
        return (f"/v1/{parts[1]} is not supported by this server: it serves text generation and pooling only "
                f"({SERVED_ROUTES})"), "unsupported_endpoint"
    return f"unknown URL: {method} {quote_value(path)}; this server serves {SERVED_ROUTES}", "unknown_url"


def allowed_methods(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """A 405's Allow header: every method some route serves the path with (Starlette's names those of the first
    such route alone, wrong for a path served by several routes, such as GET and POST /v1/files)."""
    methods: set[str] = set()
    for route in routes:
        if route.matches(scope)[0] is not Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))
