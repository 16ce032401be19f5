"""/admin/*: the tenants with their limits, keys and usage; reading the tenants file again; revoking a key.

Mounted only on a server with keys. Every route needs role 'admin' except GET /admin/usage, which
answers any other key with its own tenant's usage. No answer ever holds a key or its hash.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from http import HTTPStatus
from typing import Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.state import ServerState
from autoglm.server.tenants.access import check_admin, request_principal
from autoglm.server.tenants.file import Role, StoredKey, Tenant, TenantsFile, TenantsFileError, utc_now
from autoglm.server.tenants.keyring import KeyRing
from autoglm.server.tenants.usage import TenantUsage, Usage, utc_day

logger = logging.getLogger(__name__)
router = APIRouter(prefix="/admin")


class KeyReport(BaseModel):
    """A key as an admin sees it: its id, never the key or its hash."""

    id: str
    tenant: str
    role: Role
    created: datetime
    expires: datetime | None
    revoked: bool
    expired: bool


class TenantReport(Tenant):
    """A tenant as the file gives it, with its keys and its usage."""

    keys: list[KeyReport]
    usage: TenantUsage


class TenantList(BaseModel):
    object: Literal["list"] = "list"
    data: list[TenantReport]


class UsageReport(BaseModel):
    tenant: str
    today: Usage
    all_time: Usage


class UsageList(BaseModel):
    object: Literal["list"] = "list"
    day: str  # today, in UTC
    data: list[UsageReport]


class ReloadReport(BaseModel):
    tenants: int
    keys: int


def _state(request: Request) -> tuple[ServerState, KeyRing]:
    state: ServerState = request.app.state.server
    assert state.keyring is not None, "the admin routes are mounted only on a server with keys"
    return state, state.keyring


def _key_report(tenants: TenantsFile, key: StoredKey, now: datetime) -> KeyReport:
    return KeyReport(id=key.id, tenant=key.tenant, role=tenants.key_role(key), created=key.created,
                     expires=key.expires, revoked=key.revoked, expired=key.expired(now))


async def _usage(state: ServerState) -> dict[str, TenantUsage]:
    return await state.usage.totals() if state.usage is not None else {}


@router.get("/tenants")
async def list_tenants(raw: Request) -> TenantList:
    """Every tenant of the file: its role, models, limits, weight, keys (by id) and usage."""
    check_admin(raw)
    state, keyring = _state(raw)
    tenants, usage, now = keyring.tenants, await _usage(state), utc_now()
    reports = [TenantReport(**tenant.model_dump(),
                            keys=[_key_report(tenants, key, now) for key in tenants.keys if key.tenant == tenant.id],
                            usage=usage.get(tenant.id, TenantUsage()))
               for tenant in tenants.tenants]
    return TenantList(data=reports)


@router.get("/usage")
async def usage(raw: Request) -> UsageList:
    """An admin gets every tenant's usage, those gone from the file included; any other key its own tenant's."""
    state, keyring = _state(raw)
    principal = request_principal(raw)
    assert principal is not None, "/admin/* needs a key"
    usage = await _usage(state)
    if principal.role is Role.ADMIN:
        names = [tenant.id for tenant in keyring.tenants.tenants]
        names += sorted(name for name in usage if name not in names)
    else:
        names = [principal.tenant.id]
    reports = []
    for name in names:
        tenant_usage = usage.get(name, TenantUsage())
        reports.append(UsageReport(tenant=name, today=tenant_usage.today, all_time=tenant_usage.all_time))
    return UsageList(day=utc_day(), data=reports)


@router.post("/reload")
async def reload(raw: Request) -> ReloadReport:
    """Read the tenants file again; a bad file is answered 400, naming the problem, and the old one stays served."""
    check_admin(raw)
    _, keyring = _state(raw)
    try:
        tenants = await reload_tenants(keyring)
    except TenantsFileError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, str(error), code="invalid_tenants_file") from None
    return ReloadReport(tenants=len(tenants.tenants), keys=len(tenants.keys))


@router.post("/keys/{key_id}/revoke")
async def revoke_key(key_id: str, raw: Request) -> KeyReport:
    """Mark the key revoked in the tenants file (one line of it changed, in one step) and refuse it from now on."""
    check_admin(raw)
    _, keyring = _state(raw)
    try:
        revoked = await asyncio.to_thread(keyring.revoke, key_id)
    except TenantsFileError as error:
        raise APIError(HTTPStatus.BAD_REQUEST, str(error), code="invalid_tenants_file") from None
    except KeyError:
        known = ", ".join(key.id for key in keyring.tenants.keys) or "none"
        raise APIError(HTTPStatus.NOT_FOUND, f"no key {quote_value(key_id)} in the tenants file; keys: {known}",
                       param="key_id", code="key_not_found") from None
    logger.info("key '%s' of tenant '%s' revoked", revoked.id, revoked.tenant)
    return _key_report(keyring.tenants, revoked, utc_now())


async def reload_tenants(keyring: KeyRing) -> TenantsFile:
    """Serve the tenants file as it is now (off the event loop); a TenantsFileError leaves the old one served."""
    try:
        tenants = await asyncio.to_thread(keyring.reload)
    except TenantsFileError as error:
        logger.error("the tenants file was not read again; the keys served stay as they were: %s", error)
        raise
    logger.info("tenants file %s read again: %d tenants, %d keys", keyring.path, len(tenants.tenants),
                len(tenants.keys))
    return tenants
