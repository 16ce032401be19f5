"""Whose files and batches a request reaches (its key's tenant, or the one anonymous owner of a server
without keys), and whether it may change them."""
from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

from fastapi import Request

from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.access import request_principal

# Not a tenant id (those start with a letter or digit): what a server without keys keeps is never a tenant's.
ANONYMOUS = "(anonymous)"


@dataclass(frozen=True)
class Owner:
    """The tenant that owns what a request makes, and the key it made it with: a batch's lines run as that
    key, checked again as each runs."""

    tenant: str
    key_id: str | None


def request_owner(request: Request) -> Owner:
    principal = request_principal(request)
    return Owner(ANONYMOUS, None) if principal is None else Owner(principal.tenant.id, principal.key_id)


def check_may_change(request: Request) -> None:
    """Refuse with 403 a key whose role may not generate: uploading, deleting, making and cancelling batches
    are for keys that may; any key of the tenant may read what it keeps."""
    principal = request_principal(request)
    if principal is not None and not principal.role.may_generate:
        raise APIError(HTTPStatus.FORBIDDEN, f"the API key's role '{principal.role.value}' may read its tenant's "
                       f"files and batches but not change them; that needs role 'user' or 'admin'",
                       code="insufficient_permissions")
