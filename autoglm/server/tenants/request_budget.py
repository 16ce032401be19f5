"""One request of a tenant with limits: its admission with the tokens it reserves, the tokens it streams,
and its slot and unused tokens given back."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from fastapi import Request
from limits.errors import StorageError

from autoglm.sampling_params import SamplingParams
from autoglm.server.openai.protocol import GenerationRequest
from autoglm.server.tenants.file import Tenant
from autoglm.server.tenants.max_tokens_cap import max_tokens_field
from autoglm.server.tenants.rate_limit_headers import rate_limit_headers
from autoglm.server.tenants.rate_limits import Admission, GenerationCost, TenantRateLimiter

REQUEST_BUDGET_STATE = "request_budget"
# Told each step's new completion tokens, on the event loop.
TokenListener = Callable[[int], None]


class RequestBudget:
    """Counts the tokens a request uses as they stream (in memory: its reservation already holds them in
    the storage), and settles once when it ends."""

    def __init__(self, limiter: TenantRateLimiter, tenant: Tenant) -> None:
        self._limiter = limiter
        self._tenant = tenant
        self._admission: Admission | None = None
        self._used_tokens = 0

    async def admit(self, cost: GenerationCost) -> TokenListener:
        """Admit the request (or raise its 400, 429 or 503); the listener counts its completion tokens."""
        self._admission = await self._limiter.admit(self._tenant, cost)
        self._used_tokens = cost.prompt_tokens
        return self.tokens_generated

    def tokens_generated(self, count: int) -> None:
        self._used_tokens += count

    async def settle(self) -> None:
        """Give back the open-request slot and the tokens reserved but not used: the request has ended."""
        admission, self._admission = self._admission, None
        if admission is not None:
            await self._limiter.settle(admission, self._used_tokens)

    async def headers(self) -> dict[str, str]:
        """The x-ratelimit-* headers as the tenant's budget stands now; none if the storage cannot say."""
        try:
            return rate_limit_headers(await self._limiter.snapshot(self._tenant))
        except StorageError:
            return {}  # the outage is logged once, by the limiter's budgets


def request_budget(request: Request) -> RequestBudget | None:
    """The budget of a keyed request whose tenant has limits; None otherwise."""
    return getattr(request.state, REQUEST_BUDGET_STATE, None)


def generation_cost(body: GenerationRequest, params: SamplingParams, prompt_lengths: Sequence[int],
                    context_len: int) -> GenerationCost:
    """The most tokens the request can use: its prompts, and for each of their params.n sequences
    max_tokens, or what the context leaves after the prompt when it sets none."""
    completion = sum(params.max_tokens if params.max_tokens is not None else max(0, context_len - length)
                     for length in prompt_lengths) * params.n
    return GenerationCost(prompt_tokens=sum(prompt_lengths), completion_tokens=completion,
                          sequences=len(prompt_lengths) * params.n, max_tokens_field=max_tokens_field(body))


async def admit_generation(request: Request, body: GenerationRequest, params: SamplingParams,
                           prompt_lengths: Sequence[int], context_len: int) -> TokenListener | None:
    """Admit a generation request within its tenant's limits, reserving the most it can use; the listener
    for its completion tokens, or None when no limits apply."""
    budget = request_budget(request)
    if budget is None:
        return None
    return await budget.admit(generation_cost(body, params, prompt_lengths, context_len))
