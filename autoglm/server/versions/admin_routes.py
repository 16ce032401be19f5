"""/admin/models: what each served model's versions are doing, and the operations that change them.

With keys they need an admin key; a server without keys answers them to loopback clients only (someone on
the machine itself), since anyone who can promote a version decides what every client is served.
"""
from __future__ import annotations

import asyncio
from http import HTTPStatus
from ipaddress import ip_address
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from autoglm.registry.base import version_sort_key
from autoglm.server.openai.errors import APIError
from autoglm.server.versions.lifecycle import ModelLifecycle
from autoglm.server.versions.routing import ModelRoutes
from autoglm.server.versions.served_version import VersionState, version_id
from autoglm.server.openai.protocol import APIModel
from autoglm.server.tenants.access import check_admin, request_principal

router = APIRouter(prefix="/admin/models")


class VersionReport(BaseModel):
    version: str
    state: Literal["loading", "loaded", "draining", "unloaded"]
    in_flight: int
    aliases: list[str]


class CanaryReport(BaseModel):
    version: str
    percent: float


class ModelReport(BaseModel):
    name: str
    aliases: dict[str, str]
    canary: CanaryReport | None
    versions: list[VersionReport]


class ModelsReport(BaseModel):
    models: list[ModelReport]


class VersionBody(APIModel):
    version: str = Field(min_length=1)


class CanaryBody(VersionBody):
    percent: float = Field(ge=0, le=100)


def check_model_admin(request: Request) -> None:
    """An admin key, or on a server without keys a client on this machine; else 403."""
    if request_principal(request) is not None:
        check_admin(request)
        return
    host = request.client.host if request.client is not None else ""
    try:
        loopback = ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise APIError(HTTPStatus.FORBIDDEN, f"the model admin routes answer only clients on this machine (this "
                       f"request came from {host or 'an unknown address'}) on a server without keys; set "
                       "tenants_file or api_key to administer it with an admin key", code="insufficient_permissions")


def _lifecycle(request: Request) -> ModelLifecycle:
    check_model_admin(request)
    lifecycle = request.app.state.server.lifecycle
    assert lifecycle is not None, "the model admin routes are mounted only on a server serving a registry"
    return lifecycle


async def _report(lifecycle: ModelLifecycle, routes: ModelRoutes) -> ModelReport:
    """The model's registered versions, each with what the server does with it."""
    registered = await asyncio.to_thread(lifecycle.registry.versions, routes.name)
    pool = lifecycle.pool
    versions = sorted({entry.version for entry in registered} | {served.version for served in pool.held()
                                                                 if served.name == routes.name},
                      key=version_sort_key)
    reports = []
    for version in versions:
        served_id = version_id(routes.name, version)
        state = pool.state_of(served_id)
        reports.append(VersionReport(version=version, state=state.value, in_flight=pool.in_flight(served_id),
                                     aliases=routes.aliases_of(version) if state is not VersionState.UNLOADED
                                     else []))
    canary = CanaryReport(version=routes.canary.version, percent=routes.canary.percent) if routes.canary else None
    return ModelReport(name=routes.name, aliases=routes.aliases(), canary=canary, versions=reports)


@router.get("")
async def list_served_models(raw: Request) -> ModelsReport:
    lifecycle = _lifecycle(raw)
    return ModelsReport(models=[await _report(lifecycle, routes) for routes in lifecycle.all_routes()])


@router.post("/{name}/load")
async def load(name: str, body: VersionBody, raw: Request) -> ModelReport:
    """Load a version as warm standby: it takes only requests that name it."""
    lifecycle = _lifecycle(raw)
    return await _report(lifecycle, await lifecycle.load(name, body.version))


@router.post("/{name}/unload")
async def unload(name: str, body: VersionBody, raw: Request) -> ModelReport:
    """Unload a version once its requests end (409 while it is the stable or the canary)."""
    lifecycle = _lifecycle(raw)
    return await _report(lifecycle, await lifecycle.unload(name, body.version))


@router.post("/{name}/promote")
async def promote(name: str, body: VersionBody, raw: Request) -> ModelReport:
    """Make a version the stable, loading it if needed; refused (422) if it fails to load or its checksum."""
    lifecycle = _lifecycle(raw)
    return await _report(lifecycle, await lifecycle.promote(name, body.version))


@router.post("/{name}/rollback")
async def rollback(name: str, raw: Request) -> ModelReport:
    """Make the previous stable the stable again."""
    lifecycle = _lifecycle(raw)
    return await _report(lifecycle, await lifecycle.rollback(name))


@router.post("/{name}/canary")
async def canary(name: str, body: CanaryBody, raw: Request) -> ModelReport:
    """Send `percent` of the model's requests to a version, by a hash of their user; 0 clears the split."""
    lifecycle = _lifecycle(raw)
    return await _report(lifecycle, await lifecycle.set_canary(name, body.version, body.percent))
