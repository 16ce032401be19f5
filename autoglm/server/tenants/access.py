"""What the key behind a request may do: the role and model checks every keyed route makes (403)."""
from __future__ import annotations

from http import HTTPStatus

from fastapi import Request

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.authentication import PRINCIPAL_STATE
from autoglm.server.tenants.file import Role
from autoglm.server.tenants.keyring import Principal


def request_principal(request: Request) -> Principal | None:
    """Who the request speaks for; None on a server without keys."""
    return getattr(request.state, PRINCIPAL_STATE, None)


def may_use_model(request: Request, model: str) -> bool:
    principal = request_principal(request)
    return principal is None or principal.tenant.may_use(model)


def check_access(request: Request, model: str | None, *, generates: bool) -> None:
    """Refuse with 403 a generation by a key whose role may not generate, or a model outside its tenant's list."""
    principal = request_principal(request)
    if principal is None:
        return
    if generates and not principal.role.may_generate:
        raise APIError(HTTPStatus.FORBIDDEN, f"the API key's role '{principal.role.value}' may list models and "
                       f"tokenize but not generate; generating needs role 'user' or 'admin'",
                       code="insufficient_permissions")
    if model is not None and not principal.tenant.may_use(model):
        raise APIError(HTTPStatus.FORBIDDEN, f"tenant '{principal.tenant.id}' may not use the model "
                       f"{quote_value(model)}; it may use: {', '.join(principal.tenant.models)}",
                       param="model", code="model_not_allowed")


def check_admin(request: Request) -> None:
    """Refuse with 403 a key whose role is not 'admin' (a server without keys has no roles to check)."""
    principal = request_principal(request)
    if principal is not None and principal.role is not Role.ADMIN:
        raise APIError(HTTPStatus.FORBIDDEN, f"the API key's role '{principal.role.value}' may not use this route; "
                       f"it needs role 'admin'", code="insufficient_permissions")
