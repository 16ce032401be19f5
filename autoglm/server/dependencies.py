"""What the routes share before their own work: the server's state, the model a request may use, GET as HEAD."""
from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Depends, Request
from fastapi.types import DecoratedCallable

from autoglm.server.state import ServerState
from autoglm.server.tenants.access import check_access
from autoglm.server.versions.routing import model_name_of


def server_state(request: Request) -> ServerState:
    return request.app.state.server


State = Depends(server_state)


def get_and_head(router: APIRouter, path: str) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """A GET route that answers HEAD too (its status and headers without the body): one route, so a 405's
    Allow names both. The OpenAPI document lists the GET alone (see openai/openapi.py)."""
    return router.api_route(path, methods=["GET", "HEAD"])


def allowed_model(raw: Request, state: ServerState, requested_model: str | None, *, generates: bool) -> str:
    """The model the request is for (an omitted one chosen among those the key's tenant may use), once the key
    may use it."""
    model = state.choose_model(raw, requested_model)
    check_access(raw, model_name_of(model), generates=generates)
    return model
