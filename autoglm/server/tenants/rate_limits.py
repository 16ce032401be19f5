"""Each tenant's requests and tokens per minute and per day, and its open requests.

Requests and tokens are counted in windows of the clock (window_budget), in the rate-limit storage
every replica shares. A request reserves, when it is admitted, the most tokens it can use (its prompt,
and max_tokens for each sequence it generates), so concurrent requests can never spend more than the
budget; what it did not use is given back when it ends. Open requests are counted in this process
alone: a slot must be given back however its request ends, which a replica that dies could never do
for a counter it shares.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from http import HTTPStatus

from limits.aio.storage import Storage
from limits.errors import StorageError

from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.file import Tenant, TenantLimits
from autoglm.server.tenants.rate_limit_headers import RateLimitSnapshot, WindowState, openai_duration, retry_after
from autoglm.server.tenants.window_budget import Clock, Reservation, WindowBudgets, WindowFull

RATE_LIMIT_EXCEEDED = "rate_limit_exceeded"


@dataclass(frozen=True)
class LimitWindows:
    """How long 'a minute' and 'a day' of the limits last, and the clock they are cut from: the real
    ones, except in tests that drive time themselves."""

    minute_s: int = 60
    day_s: int = 86_400
    clock: Clock = time.time


@dataclass(frozen=True)
class GenerationCost:
    """The most tokens a generation request can use: its prompts', and max_tokens for each sequence
    (a request that sets none may fill the context). `max_tokens_field` names the field that bounds it."""

    prompt_tokens: int
    completion_tokens: int
    sequences: int
    max_tokens_field: str

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class _Limit:
    setting: str  # the TenantLimits field
    kind: str  # what it counts, OpenAI's error type for it: 'requests' or 'tokens'
    per: str  # 'minute' or 'day'

    def amount(self, limits: TenantLimits) -> int | None:
        return getattr(limits, self.setting)

    def length_s(self, windows: LimitWindows) -> int:
        return windows.minute_s if self.per == "minute" else windows.day_s


REQUESTS_PER_MINUTE = _Limit("requests_per_minute", "requests", "minute")
TOKENS_PER_MINUTE = _Limit("tokens_per_minute", "tokens", "minute")
TOKENS_PER_DAY = _Limit("tokens_per_day", "tokens", "day")
REQUESTS_PER_DAY = _Limit("requests_per_day", "requests", "day")
_REQUEST_LIMITS = (REQUESTS_PER_MINUTE, REQUESTS_PER_DAY)  # one per request, never given back
_TOKEN_LIMITS = (TOKENS_PER_MINUTE, TOKENS_PER_DAY)


@dataclass
class Admission:
    """An admitted request: its open-request slot and the tokens it reserved in each token window."""

    tenant: Tenant
    reserved_tokens: int
    reservations: list[Reservation] = field(default_factory=list)


def has_limits(limits: TenantLimits) -> bool:
    return limits != TenantLimits()


def storage_unavailable() -> APIError:
    """503 for a request whose budget cannot be checked (the outage is in the server's log, once)."""
    return APIError(HTTPStatus.SERVICE_UNAVAILABLE, "the server cannot check this tenant's rate limits now (its "
                    "rate-limit storage is unreachable); retry later", code="rate_limit_storage_unavailable")


class TenantRateLimiter:
    """Admits a tenant's generation requests within its limits and gives back what they did not use.

    Limits are read from the Tenant each call is given, the one of the request's own principal,
    so a reloaded tenants file applies to the next request; the windows are keyed by tenant and limit,
    not by amount, so a reload that changes a limit keeps what the tenant already used.
    """

    def __init__(self, storage: Storage, windows: LimitWindows = LimitWindows()) -> None:
        self._budgets = WindowBudgets(storage, windows.clock)
        self._windows = windows
        self._open: Counter[str] = Counter()

    async def admit(self, tenant: Tenant, cost: GenerationCost) -> Admission:
        """Let one generation request in, reserving one request and `cost` tokens in each of the tenant's
        windows (all or none), or raise: 400 for a cost no window could ever hold, the 429 of the limit it
        would cross, 503 when the storage cannot be reached. Admitted, it holds an open-request slot and
        its reservations until `settle`."""
        for limit in _TOKEN_LIMITS:
            amount = limit.amount(tenant.limits)
            if amount is not None and cost.tokens > amount:
                raise _too_large(tenant, limit, amount, cost)
        self._take_slot(tenant)
        admission = Admission(tenant, cost.tokens)
        taken: list[Reservation] = []
        try:
            for limit, amount in self._limits_of(tenant, (*_REQUEST_LIMITS, *_TOKEN_LIMITS)):
                spent = 1 if limit in _REQUEST_LIMITS else cost.tokens
                try:
                    reservation = await self._budgets.take(self._name(tenant, limit), amount,
                                                           limit.length_s(self._windows), spent)
                except WindowFull as full:
                    raise _exceeded(tenant, limit, full.window) from None
                taken.append(reservation)
                if limit not in _REQUEST_LIMITS:
                    admission.reservations.append(reservation)
        except BaseException as error:
            self.release(tenant)
            await self._give_back_all(taken)
            if isinstance(error, StorageError):
                raise storage_unavailable() from None
            raise
        return admission

    async def settle(self, admission: Admission, used_tokens: int) -> None:
        """The request has ended having used `used_tokens`: give back its slot and the rest of what it
        reserved. A refund the storage cannot take is lost (the tenant is charged what it reserved)."""
        self.release(admission.tenant)
        unused = admission.reserved_tokens - used_tokens
        for reservation in admission.reservations:
            try:
                await self._budgets.give_back(reservation, unused)
            except StorageError:
                pass  # logged once per outage by the budgets

    def release(self, tenant: Tenant) -> None:
        """Give back the open-request slot an admitted request held."""
        self._open[tenant.id] -= 1
        if not self._open[tenant.id]:
            del self._open[tenant.id]

    async def snapshot(self, tenant: Tenant) -> RateLimitSnapshot:
        """The tenant's windows as OpenAI's headers report them: per minute, or per day for a kind the tenant
        limits only by the day (as OpenAI's headers show a daily request quota) (raises StorageError)."""
        requests = REQUESTS_PER_MINUTE if tenant.limits.requests_per_minute is not None else REQUESTS_PER_DAY
        return RateLimitSnapshot(requests=await self._state(tenant, requests),
                                 tokens=await self._state(tenant, TOKENS_PER_MINUTE))

    def _take_slot(self, tenant: Tenant) -> None:
        most = tenant.limits.max_concurrent_requests
        if most is not None and self._open[tenant.id] >= most:
            raise APIError(HTTPStatus.TOO_MANY_REQUESTS,
                           f"Too many concurrent requests for tenant '{tenant.id}': max_concurrent_requests is "
                           f"{most} and {self._open[tenant.id]} are open; retry once one of them has finished.",
                           code=RATE_LIMIT_EXCEEDED, error_type="requests", headers={"Retry-After": retry_after(0)})
        self._open[tenant.id] += 1

    async def _give_back_all(self, taken: list[Reservation]) -> None:
        """Undo the reservations of a request refused after some of them were taken."""
        for reservation in taken:
            try:
                await self._budgets.give_back(reservation, reservation.amount)
            except StorageError:
                pass  # logged once per outage by the budgets

    async def _state(self, tenant: Tenant, limit: _Limit) -> WindowState | None:
        amount = limit.amount(tenant.limits)
        if amount is None:
            return None
        return await self._budgets.state(self._name(tenant, limit), amount, limit.length_s(self._windows))

    @staticmethod
    def _limits_of(tenant: Tenant, limits: tuple[_Limit, ...]) -> list[tuple[_Limit, int]]:
        """Those of `limits` the tenant has, with their amounts."""
        return [(limit, amount) for limit in limits if (amount := limit.amount(tenant.limits)) is not None]

    @staticmethod
    def _name(tenant: Tenant, limit: _Limit) -> str:
        return f"{tenant.id}/{limit.setting}"


def _exceeded(tenant: Tenant, limit: _Limit, window: WindowState) -> APIError:
    """OpenAI's 429: type 'requests' or 'tokens', the limit named with its value and when it resets."""
    return APIError(HTTPStatus.TOO_MANY_REQUESTS,
                    f"Rate limit reached for tenant '{tenant.id}' on {limit.kind} per {limit.per} "
                    f"({limit.setting}): limit {window.limit}, remaining {window.remaining}. "
                    f"Try again in {openai_duration(window.reset_s)}.",
                    code=RATE_LIMIT_EXCEEDED, error_type=limit.kind,
                    headers={"Retry-After": retry_after(window.reset_s)})


def _too_large(tenant: Tenant, limit: _Limit, amount: int, cost: GenerationCost) -> APIError:
    """400 for a request that could use more tokens than a whole window holds: waiting would never help."""
    field_name = cost.max_tokens_field
    most = (amount - cost.prompt_tokens) // cost.sequences
    advice = (f"ask for at most {most} {field_name}" if most >= 1
              else "its prompt alone uses the whole window; send a shorter one")
    return APIError(HTTPStatus.BAD_REQUEST,
                    f"this request may use {cost.tokens} tokens ({cost.prompt_tokens} in its prompt and "
                    f"{cost.completion_tokens} to generate: {field_name} for each of {cost.sequences} "
                    f"sequence{'s' * (cost.sequences != 1)}), more than the {limit.setting} of {amount} of tenant "
                    f"'{tenant.id}' allows in a whole window; {advice}",
                    param=field_name, code="invalid_value")
