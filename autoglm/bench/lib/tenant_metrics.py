"""What each tenant of a multi-tenant run got: its own aggregates, and its tokens while every tenant waited.

Fair scheduling shows only while every tenant has work waiting: a tenant with nothing queued
cannot take its share. A tenant is backlogged while one of its requests is sent but has no
first token yet; the tokens each tenant was served inside the times when all were backlogged,
over their sum, is the split the weights should set.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.lib.serve_metrics import ServeMetrics, aggregate
from autoglm.bench.lib.tenant_load import TenantLoad

Interval = tuple[float, float]


def _union(intervals: Sequence[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(interval for interval in intervals if interval[1] > interval[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _intersection(first: Sequence[Interval], second: Sequence[Interval]) -> list[Interval]:
    return [(max(a, c), min(b, d)) for a, b in first for c, d in second if max(a, c) < min(b, d)]


def waiting_intervals(results: Sequence[RequestResult]) -> list[Interval]:
    """When requests of these results waited: sent, no token yet (a failed one until it failed, if known)."""
    intervals = []
    for result in results:
        first = result.chunk_times[0] if result.chunk_times else result.end_time
        if first is not None:
            intervals.append((result.send_time, first))
    return _union(intervals)


def backlogged_windows(results_by_tenant: Mapping[str, Sequence[RequestResult]]) -> list[Interval]:
    """The times when every tenant had a request waiting."""
    windows: list[Interval] | None = None
    for results in results_by_tenant.values():
        waiting = waiting_intervals(results)
        windows = waiting if windows is None else _intersection(windows, waiting)
    return windows or []


def tokens_within(results: Sequence[RequestResult], windows: Sequence[Interval]) -> float:
    """Tokens the successful requests received inside the windows; a chunk carries its request's tokens
    over its chunks (one each, unless the server sends several tokens a chunk)."""
    tokens = 0.0
    for result in results:
        if not result.success or not result.chunk_times:
            continue
        per_chunk = result.output_tokens / len(result.chunk_times)
        tokens += per_chunk * sum(any(start <= time < end for start, end in windows) for time in result.chunk_times)
    return tokens


@dataclass(frozen=True)
class TenantResult:
    name: str
    weight: float
    request_rate: float
    metrics: ServeMetrics
    backlogged_tokens: float  # tokens served while every tenant was backlogged

    def to_dict(self, rate_text: str) -> dict[str, Any]:
        return {"name": self.name, "weight": self.weight, "request_rate": rate_text, "metrics": self.metrics.to_dict(),
                "backlogged_tokens": self.backlogged_tokens}


def tenant_results(loads: Sequence[TenantLoad], rates: Mapping[str, float], results: Sequence[RequestResult],
                   duration_s: float, slos_ms: Mapping[str, float] | None = None
                   ) -> tuple[list[TenantResult], float]:
    """Each tenant's aggregates over the whole run, and the seconds when all tenants were backlogged."""
    by_tenant = {load.name: [result for result in results if result.tenant == load.name] for load in loads}
    windows = backlogged_windows(by_tenant)
    tenants = [TenantResult(load.name, load.weight, rates[load.name],
                            aggregate(by_tenant[load.name], duration_s, slos_ms),
                            tokens_within(by_tenant[load.name], windows))
               for load in loads]
    return tenants, sum(end - start for start, end in windows)


def backlogged_shares(tenants: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """Each tenant's share of the tokens served while all were backlogged (from a results file's
    ``tenants`` entries); None when they never all were."""
    total = sum(tenant["backlogged_tokens"] for tenant in tenants)
    if total == 0:
        return None
    return {tenant["name"]: tenant["backlogged_tokens"] / total for tenant in tenants}


def weight_shares(tenants: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The share of tokens each tenant's weight entitles it to while all are backlogged."""
    total = sum(tenant["weight"] for tenant in tenants)
    return {tenant["name"]: tenant["weight"] / total for tenant in tenants}
