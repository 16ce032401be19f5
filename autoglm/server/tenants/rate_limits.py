"""Each tenant's requests and tokens per minute, tokens per day and open requests, counted with `limits`.

Requests are counted in a moving window: exact, and a refused request takes nothing. Tokens are
counted in fixed windows: their hits always count, so a stream that overshoots the budget spends
the share of the tenant's next requests, and a window is one counter however many tokens it holds.
Open requests are counted in this process alone: a slot must be given back however its request
ends, which a replica that dies could never do for a counter it shares.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from http import HTTPStatus

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import Storage
from limits.aio.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter, RateLimiter
from limits.errors import StorageError

from autoglm.server.errors import APIError
from autoglm.server.tenants.file import Tenant, TenantLimits
from autoglm.server.tenants.rate_limit_headers import RateLimitSnapshot, WindowState, openai_duration, retry_after

logger = logging.getLogger(__name__)

_NAMESPACE = "autoglm"
RATE_LIMIT_EXCEEDED = "rate_limit_exceeded"


@dataclass(frozen=True)
class LimitWindows:
    """How long 'a minute' and 'a day' of the limits last: their names, except in tests that cannot wait."""

    minute_s: int = 60
    day_s: int = 86_400


class _TenantWindow(RateLimitItemPerSecond):
    """A window keyed by tenant and limit but not by amount, so reloading a tenants file that changes a
    limit keeps what the tenant already used."""

    def key_for(self, *identifiers: bytes | str | int | float) -> str:
        return "/".join([self.namespace, *map(str, identifiers), f"{self.multiples}s"])


@dataclass(frozen=True)
class _Limit:
    setting: str  # the TenantLimits field
    kind: str  # what it counts, OpenAI's error type for it: 'requests' or 'tokens'
    per: str  # 'minute' or 'day'

    def amount(self, limits: TenantLimits) -> int | None:
        return getattr(limits, self.setting)

    def item(self, amount: int, windows: LimitWindows) -> RateLimitItem:
        seconds = windows.minute_s if self.per == "minute" else windows.day_s
        return _TenantWindow(amount, multiples=seconds, namespace=_NAMESPACE)


REQUESTS_PER_MINUTE = _Limit("requests_per_minute", "requests", "minute")
TOKENS_PER_MINUTE = _Limit("tokens_per_minute", "tokens", "minute")
TOKENS_PER_DAY = _Limit("tokens_per_day", "tokens", "day")
_TOKEN_LIMITS = (TOKENS_PER_MINUTE, TOKENS_PER_DAY)


def has_limits(limits: TenantLimits) -> bool:
    return limits != TenantLimits()


def storage_unavailable(error: StorageError) -> APIError:
    """503 for a request whose budget cannot be checked, with the cause in the server's log."""
    cause = error.storage_error
    logger.error("the rate-limit storage cannot be reached (%s: %s); limited tenants' requests get 503 until it "
                 "can", type(cause).__name__, cause)
    return APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the server cannot check this tenant's rate limits now (its "
                    "rate-limit storage is unreachable); retry later", code="rate_limit_storage_unavailable")


class TenantRateLimiter:
    """Admits a tenant's generation requests within its limits and counts the tokens they use.

    Limits are read from the Tenant each call is given, the one of the request's own principal,
    so a reloaded tenants file applies to the next request.
    """

    def __init__(self, storage: Storage, windows: LimitWindows = LimitWindows()) -> None:
        self._requests = MovingWindowRateLimiter(storage)
        self._tokens = FixedWindowRateLimiter(storage)
        self._windows = windows
        self._open: Counter[str] = Counter()

    async def admit(self, tenant: Tenant, prompt_tokens: int) -> None:
        """Let one generation request in and count its prompt, or raise the 429 of the limit it would cross
        (503 when the storage cannot be reached). Admitted, it holds an open-request slot until `release`.

        Token budgets are only checked to have something left: how many tokens a request will use is
        known only once it has streamed them.
        """
        try:
            for limit in _TOKEN_LIMITS:
                window = await self._window(self._tokens, limit, tenant)
                if window is not None and window.remaining <= 0:
                    raise _exceeded(tenant, limit, window)
            self._take_slot(tenant)
            try:
                await self._hit_request(tenant)
                await self.count_tokens(tenant, prompt_tokens)
            except BaseException:
                self.release(tenant)
                raise
        except StorageError as error:
            raise storage_unavailable(error) from None

    def release(self, tenant: Tenant) -> None:
        """Give back the open-request slot an admitted request held."""
        self._open[tenant.id] -= 1
        if not self._open[tenant.id]:
            del self._open[tenant.id]

    async def count_tokens(self, tenant: Tenant, tokens: int) -> None:
        """Spend `tokens` from the tenant's token budgets, past their end if need be (raises StorageError)."""
        for limit in _TOKEN_LIMITS:
            amount = limit.amount(tenant.limits)
            if amount is not None and tokens:
                await self._tokens.hit(limit.item(amount, self._windows), tenant.id, limit.setting, cost=tokens)

    async def snapshot(self, tenant: Tenant) -> RateLimitSnapshot:
        """The tenant's per-minute windows, as OpenAI's headers report them (raises StorageError)."""
        return RateLimitSnapshot(requests=await self._window(self._requests, REQUESTS_PER_MINUTE, tenant),
                                 tokens=await self._window(self._tokens, TOKENS_PER_MINUTE, tenant))

    def _take_slot(self, tenant: Tenant) -> None:
        most = tenant.limits.max_concurrent_requests
        if most is not None and self._open[tenant.id] >= most:
            raise APIError(HTTPStatus.TOO_MANY_REQUESTS,
                           f"Too many concurrent requests for tenant '{tenant.id}': max_concurrent_requests is "
                           f"{most} and {self._open[tenant.id]} are open; retry once one of them has finished.",
                           code=RATE_LIMIT_EXCEEDED, error_type="requests", headers={"Retry-After": retry_after(0)})
        self._open[tenant.id] += 1

    async def _hit_request(self, tenant: Tenant) -> None:
        amount = REQUESTS_PER_MINUTE.amount(tenant.limits)
        if amount is None:
            return
        item = REQUESTS_PER_MINUTE.item(amount, self._windows)
        if not await self._requests.hit(item, tenant.id, REQUESTS_PER_MINUTE.setting):
            window = await self._window(self._requests, REQUESTS_PER_MINUTE, tenant)
            assert window is not None
            raise _exceeded(tenant, REQUESTS_PER_MINUTE, window)

    async def _window(self, limiter: RateLimiter, limit: _Limit, tenant: Tenant) -> WindowState | None:
        amount = limit.amount(tenant.limits)
        if amount is None:
            return None
        stats = await limiter.get_window_stats(limit.item(amount, self._windows), tenant.id, limit.setting)
        return WindowState(limit=amount, remaining=max(0, stats.remaining),
                           reset_s=max(0.0, stats.reset_time - time.time()))


def _exceeded(tenant: Tenant, limit: _Limit, window: WindowState) -> APIError:
    """OpenAI's 429: type 'requests' or 'tokens', the limit named with its value and when it resets."""
    return APIError(HTTPStatus.TOO_MANY_REQUESTS,
                    f"Rate limit reached for tenant '{tenant.id}' on {limit.kind} per {limit.per} "
                    f"({limit.setting}): limit {window.limit}, remaining {window.remaining}. "
                    f"Try again in {openai_duration(window.reset_s)}.",
                    code=RATE_LIMIT_EXCEEDED, error_type=limit.kind,
                    headers={"Retry-After": retry_after(window.reset_s)})
