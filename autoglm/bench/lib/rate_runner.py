"""One run at one request rate: every request sent at its time, at most ``max_concurrency`` in flight."""
from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from autoglm.bench.lib.arrivals import send_times
from autoglm.bench.lib.client import CompletionTarget, RequestResult, send_request
from autoglm.bench.lib.datasets import ServeRequest
from autoglm.bench.lib.tenant_load import TenantLoad


@dataclass(frozen=True)
class Send:
    """One request, where it goes (and as which tenant), and when, in seconds after the run starts."""

    target: CompletionTarget
    request: ServeRequest
    send_time: float


def sends_to(target: CompletionTarget, requests: Sequence[ServeRequest], send_times: Sequence[float],
             start_s: float = 0.0) -> list[Send]:
    """Every request to one target, each at its send time after ``start_s``."""
    return [Send(target, request, start_s + send_time) for request, send_time in zip(requests, send_times)]


def tenant_sends(loads: Sequence[TenantLoad], targets: Sequence[CompletionTarget],
                 requests_of: Callable[[TenantLoad], Sequence[ServeRequest]], rate: float, burstiness: float,
                 seed: int) -> tuple[list[Send], dict[str, float]]:
    """Every tenant's requests to its target at its own rate (``rate`` where it has none), from its start;
    and the rate each tenant sent at."""
    sends, rates = [], {}
    for position, (load, target) in enumerate(zip(loads, targets)):
        requests = requests_of(load)
        rates[load.name] = rate if load.request_rate is None else load.request_rate
        sends += sends_to(target, requests, send_times(len(requests), rates[load.name], burstiness, seed + position),
                          load.start_s)
    return sends, rates


@dataclass(frozen=True)
class RateRun:
    """The results of one run, in request order, and its wall time from the first send to the last answer."""

    request_rate: float
    duration_s: float
    results: list[RequestResult]


async def run_requests(sends: Sequence[Send], max_concurrency: int | None) -> tuple[list[RequestResult], float]:
    """Results in request order and the run's duration.

    A request waits for its send time and then, under ``max_concurrency``, for a free slot; its
    latencies count from when it is actually sent. The connection pool is unbounded so that no
    request queues inside the client unseen.
    """
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=None, limits=limits) as http:
        origin = time.perf_counter()

        async def send_at(send: Send) -> RequestResult:
            await asyncio.sleep(max(0.0, origin + send.send_time - time.perf_counter()))
            if slots is None:
                return await send_request(http, send.target, send.request, origin)
            async with slots:
                return await send_request(http, send.target, send.request, origin)

        results = await asyncio.gather(*map(send_at, sends))
        return list(results), time.perf_counter() - origin


def run_at_rate(sends: Sequence[Send], request_rate: float, max_concurrency: int | None) -> RateRun:
    results, duration_s = asyncio.run(run_requests(sends, max_concurrency))
    return RateRun(request_rate, duration_s, results)


def rate_label(rate: float) -> str:
    """``2``, ``0.5`` or ``inf``: a rate as a user typed it, and as JSON can hold it."""
    return "inf" if math.isinf(rate) else f"{rate:g}"
