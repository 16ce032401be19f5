"""``Authorization: Bearer KEY`` (or ``x-api-key: KEY``, as Anthropic's clients send it) checked on every
inference route before its body is read.

The principal found is left in the request's state for the routes, which check its role and
models (403); a missing or bad key is a 401 here. Keys are never logged or echoed back. A request
made inside the server (a batch's line) arrives with its principal already in its ASGI scope's
state, which no client can write, and keeps it.
"""
from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.keyring import KeyRing, invalid_key

# Routes that need a key: the OpenAI API, the tokenizer's, the admin routes, and /metrics if the
# metrics_require_key setting says so. /health and /version stay open.
_KEYED_PREFIXES = ("/v1/", "/admin/")
_KEYED_PATHS = frozenset({"/tokenize", "/detokenize", "/tokenizer_info"})
METRICS_PATH = "/metrics"
PRINCIPAL_STATE = "principal"


def needs_key(path: str, keyed_metrics: bool = False) -> bool:
    return path.startswith(_KEYED_PREFIXES) or path in _KEYED_PATHS or (keyed_metrics and path == METRICS_PATH)


def bearer_token(scope: Scope) -> str | None:
    """The key of an 'Authorization: Bearer KEY' header, or None without one."""
    header = _header(scope, b"authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def presented_key(scope: Scope) -> str | None:
    """The key of the Authorization header, else of an 'x-api-key: KEY' header; None without either."""
    token = bearer_token(scope)
    if token is not None:
        return token
    api_key = (_header(scope, b"x-api-key") or "").strip()
    return api_key or None


def _header(scope: Scope, name: bytes) -> str | None:
    return next((value.decode("latin-1") for header, value in scope["headers"] if header == name), None)


class AuthenticationMiddleware:
    """Answers 401 to a keyed route's request without a valid key; passes the rest with their principal."""

    def __init__(self, app: ASGIApp, keyring: KeyRing, keyed_metrics: bool = False) -> None:
        self.app = app
        self.keyring = keyring
        self.keyed_metrics = keyed_metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        in_process = PRINCIPAL_STATE in scope.get("state", {})
        if scope["type"] == "http" and needs_key(scope["path"], self.keyed_metrics) and not in_process:
            token = presented_key(scope)
            try:
                if token is None:
                    raise invalid_key("You didn't provide an API key; send it as 'Authorization: Bearer KEY' or "
                                      "'x-api-key: KEY'.")
                principal = self.keyring.authenticate(token)
            except APIError as refusal:
                await refusal.to_response()(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
        await self.app(scope, receive, send)
