"""A budget for every keyed request of a tenant with limits, OpenAI's x-ratelimit-* headers on its answer,
and its open-request slot given back as soon as the answer's last byte is out.

Sits inside the AuthenticationMiddleware, which has found the request's principal by then.
"""
from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autoglm.server.tenants.authentication import PRINCIPAL_STATE
from autoglm.server.tenants.keyring import Principal
from autoglm.server.tenants.rate_limits import TenantRateLimiter, has_limits
from autoglm.server.tenants.request_budget import REQUEST_BUDGET_STATE, RequestBudget


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp, limiter: TenantRateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal: Principal | None = scope.get("state", {}).get(PRINCIPAL_STATE)
        if scope["type"] != "http" or principal is None or not has_limits(principal.tenant.limits):
            await self.app(scope, receive, send)
            return
        budget = RequestBudget(self.limiter, principal.tenant)
        scope["state"][REQUEST_BUDGET_STATE] = budget

        async def send_with_budget(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(await budget.headers())
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                # Settled before the client sees the end, so its next request finds the tokens counted.
                await budget.settle()
            await send(message)

        try:
            await self.app(scope, receive, send_with_budget)
        finally:
            await budget.settle()  # the answer never ended: an error, or a client gone away
