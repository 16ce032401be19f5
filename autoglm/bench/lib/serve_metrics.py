"""What a run measured, in vLLM's names: throughputs, latency percentiles in ms, and goodput.

Failed requests count as failed and nowhere else: their partial timings would make latencies
look better than what a user who got an answer saw.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autoglm.bench.lib.request_result import RequestResult

# Service-level objectives ``--goodput`` takes, each a bound in ms on one request's latency.
SLO_NAMES = ("ttft", "tpot", "e2el")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile, interpolated linearly between order statistics (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class LatencyStats:
    """Summary of one latency in ms; all None when no request measured it."""

    mean_ms: float | None
    median_ms: float | None
    p90_ms: float | None
    p99_ms: float | None

    @classmethod
    def of(cls, seconds: Sequence[float]) -> LatencyStats:
        if not seconds:
            return cls(None, None, None, None)
        ms = [value * 1000 for value in seconds]
        return cls(sum(ms) / len(ms), percentile(ms, 50), percentile(ms, 90), percentile(ms, 99))


@dataclass(frozen=True)
class ServeMetrics:
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int | None  # None when some completed request's prompt length is unknown
    total_output_tokens: int
    request_throughput: float  # completed requests per second
    output_throughput: float  # output tokens per second
    total_token_throughput: float | None
    good_requests: int | None  # requests meeting every --goodput SLO; None without SLOs
    goodput: float | None  # good requests per second
    ttft: LatencyStats
    tpot: LatencyStats
    itl: LatencyStats  # every gap between streamed chunks of every request, pooled
    e2el: LatencyStats

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def meets_slos(result: RequestResult, slos_ms: Mapping[str, float]) -> bool:
    """A successful request within every bound; a latency it could not have (TPOT of one token) passes."""
    latencies = {"ttft": result.ttft_s, "tpot": result.tpot_s, "e2el": result.e2el_s}
    return result.success and all(
        latencies[name] is None or latencies[name] * 1000 <= bound for name, bound in slos_ms.items()
    )


def aggregate(results: Sequence[RequestResult], duration_s: float,
              slos_ms: Mapping[str, float] | None = None) -> ServeMetrics:
    done = [result for result in results if result.success]
    input_counts = [result.input_tokens for result in done]
    total_input = None if None in input_counts else sum(input_counts)
    total_output = sum(result.output_tokens for result in done)
    good = None if not slos_ms else sum(meets_slos(result, slos_ms) for result in done)

    def per_second(count: int) -> float:
        return count / duration_s if duration_s > 0 else 0.0

    def measured(values: list[float | None]) -> list[float]:
        return [value for value in values if value is not None]

    return ServeMetrics(
        completed=len(done),
        failed=len(results) - len(done),
        duration_s=duration_s,
        total_input_tokens=total_input,
        total_output_tokens=total_output,
        request_throughput=per_second(len(done)),
        output_throughput=per_second(total_output),
        total_token_throughput=None if total_input is None else per_second(total_input + total_output),
        good_requests=good,
        goodput=None if good is None else per_second(good),
        ttft=LatencyStats.of(measured([result.ttft_s for result in done])),
        tpot=LatencyStats.of(measured([result.tpot_s for result in done])),
        itl=LatencyStats.of([gap for result in done for gap in result.itls_s]),
        e2el=LatencyStats.of(measured([result.e2el_s for result in done])),
    )
