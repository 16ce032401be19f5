"""One request of a tenant with limits: its admission, the tokens it streams, and its slot given back."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fastapi import Request
from limits.errors import StorageError

from autoglm.server.tenants.file import Tenant
from autoglm.server.tenants.rate_limit_headers import rate_limit_headers
from autoglm.server.tenants.rate_limits import TenantRateLimiter

logger = logging.getLogger(__name__)

REQUEST_BUDGET_STATE = "request_budget"
# Told each step's new completion tokens, on the event loop.
TokenListener = Callable[[int], None]


class RequestBudget:
    """Streamed tokens are counted as they come, one storage call in flight at a time holding all that
    arrived meanwhile, so a slow storage never makes a backlog of calls."""

    def __init__(self, limiter: TenantRateLimiter, tenant: Tenant) -> None:
        self._limiter = limiter
        self._tenant = tenant
        self._admitted = False
        self._unsent_tokens = 0
        self._sending: asyncio.Task[None] | None = None

    async def admit(self, prompt_tokens: int) -> TokenListener:
        """Admit the request (or raise its 429 or 503); the listener counts its completion tokens."""
        await self._limiter.admit(self._tenant, prompt_tokens)
        self._admitted = True
        return self.tokens_generated

    def tokens_generated(self, count: int) -> None:
        self._unsent_tokens += count
        if self._sending is None or self._sending.done():
            self._sending = asyncio.create_task(self._send_tokens())

    async def settle(self) -> None:
        """Count every token generated so far and give back the open-request slot: the request has ended."""
        if self._admitted:
            self._admitted = False
            self._limiter.release(self._tenant)
        if self._sending is not None:
            await self._sending
        await self._send_tokens()

    async def headers(self) -> dict[str, str]:
        """The x-ratelimit-* headers as the tenant's budget stands now; none if the storage cannot say."""
        try:
            return rate_limit_headers(await self._limiter.snapshot(self._tenant))
        except StorageError as error:
            logger.warning("x-ratelimit-* headers left out: the rate-limit storage cannot be reached (%s)",
                           error.storage_error)
            return {}

    async def _send_tokens(self) -> None:
        while self._unsent_tokens:
            count, self._unsent_tokens = self._unsent_tokens, 0
            try:
                await self._limiter.count_tokens(self._tenant, count)
            except StorageError as error:
                logger.error("%d tokens of tenant '%s' went uncounted: the rate-limit storage cannot be reached "
                             "(%s)", count, self._tenant.id, error.storage_error)


def request_budget(request: Request) -> RequestBudget | None:
    """The budget of a keyed request whose tenant has limits; None otherwise."""
    return getattr(request.state, REQUEST_BUDGET_STATE, None)


async def admit_generation(request: Request, prompt_tokens: int) -> TokenListener | None:
    """Admit a generation request within its tenant's limits; the listener for its completion tokens,
    or None when no limits apply."""
    budget = request_budget(request)
    return None if budget is None else await budget.admit(prompt_tokens)
