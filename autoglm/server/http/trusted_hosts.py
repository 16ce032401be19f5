"""The Host header checked against an allow-list, so a web page cannot reach a local server by DNS rebinding.

A page on evil.example whose name is re-pointed at 127.0.0.1 reaches the server with
``Host: evil.example``; a server that answers only to the names it is known by refuses it. By
default a server bound to a loopback address answers only to localhost names, and one bound to
another address answers to any name (the orchestrators' probes use whatever address they see).
A refusal is a 400 in OpenAI's error shape (Starlette's TrustedHostMiddleware answers in plain
text and has no default by address, hence this one).
"""
from __future__ import annotations

import ipaddress
from http import HTTPStatus

from starlette.types import ASGIApp, Receive, Scope, Send

from autoglm.server.openai.errors import APIError

# The names a browser gives a loopback server; any port goes with them.
LOCALHOST_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY_HOST = "*"
# Characters of a refused Host header quoted back in the error.
_QUOTED_CHARS = 64


def default_allowed_hosts(bind_host: str) -> tuple[str, ...]:
    """Localhost names for a server bound to a loopback address, any name for one bound elsewhere."""
    return LOCALHOST_NAMES if _is_loopback(bind_host) else (ANY_HOST,)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name other than localhost
        return False


def host_name(header: str) -> str:
    """The host of a Host header without its port, lowercase: '[::1]:8000' -> '[::1]'."""
    name = header.strip().lower()
    if name.startswith("["):
        return name[:name.find("]") + 1]
    return name.partition(":")[0]


def host_allowed(name: str, allowed: tuple[str, ...]) -> bool:
    """Whether `name` is one of `allowed`: '*' is any, '*.example.com' any subdomain of example.com."""
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == ANY_HOST or name == pattern:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class HostAllowListMiddleware:
    """Answers 400 to a request whose Host header names a host not in `allowed`."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ANY_HOST not in self.allowed:
            header = next((value.decode("latin-1") for name, value in scope["headers"] if name == b"host"), "")
            if not host_allowed(host_name(header), self.allowed):
                await self._refusal(header).to_response()(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, header: str) -> APIError:
        quoted = header[:_QUOTED_CHARS] + ("..." if len(header) > _QUOTED_CHARS else "")
        return APIError(HTTPStatus.BAD_REQUEST,
                        f"Host header {quoted!r} names a host this server does not answer to; allowed: "
                        f"{', '.join(self.allowed)} (setting allowed_hosts)", param="Host", code="invalid_host")
