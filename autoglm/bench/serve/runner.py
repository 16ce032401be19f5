"""One run at one request rate: every request sent at its time, at most ``max_concurrency`` in flight."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from autoglm.bench.serve.client import CompletionTarget, RequestResult, send_request
from autoglm.bench.serve.datasets import ServeRequest


@dataclass(frozen=True)
class RateRun:
    """The results of one run, in request order, and its wall time from the first send to the last answer."""

    request_rate: float
    duration_s: float
    results: list[RequestResult]


async def run_requests(target: CompletionTarget, requests: Sequence[ServeRequest], send_times: Sequence[float],
                       max_concurrency: int | None) -> tuple[list[RequestResult], float]:
    """Results in request order and the run's duration.

    A request waits for its send time and then, under ``max_concurrency``, for a free slot; its
    latencies count from when it is actually sent. The connection pool is unbounded so that no
    request queues inside the client unseen.
    """
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=None, limits=limits) as http:
        origin = time.perf_counter()

        async def send_at(request: ServeRequest, send_time: float) -> RequestResult:
            await asyncio.sleep(max(0.0, origin + send_time - time.perf_counter()))
            if slots is None:
                return await send_request(http, target, request, origin)
            async with slots:
                return await send_request(http, target, request, origin)

        results = await asyncio.gather(*map(send_at, requests, send_times))
        return list(results), time.perf_counter() - origin


def run_at_rate(target: CompletionTarget, requests: Sequence[ServeRequest], send_times: Sequence[float],
                request_rate: float, max_concurrency: int | None) -> RateRun:
    results, duration_s = asyncio.run(run_requests(target, requests, send_times, max_concurrency))
    return RateRun(request_rate, duration_s, results)
