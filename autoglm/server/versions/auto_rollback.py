"""Automatic rollback: a canary whose recent requests fail too often or start too slowly loses its traffic."""
from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from autoglm.config import ServerConfig
from autoglm.server.observability.tracking import RequestOutcome


@dataclass(frozen=True)
class RollbackThresholds:
    """What a canary must stay within over its last `window_s`, judged once it has `min_requests` there."""

    window_s: float
    min_requests: int
    max_error_rate: float
    max_p99_ttft_s: float | None

    @classmethod
    def from_config(cls, config: ServerConfig) -> RollbackThresholds:
        return cls(config.versions.auto_rollback_window_s, config.versions.auto_rollback_min_requests,
                   config.versions.auto_rollback_max_error_rate, config.versions.auto_rollback_max_p99_ttft_s)


@dataclass(frozen=True)
class _Observed:
    at: float
    failed: bool
    time_to_first_token_s: float | None


def p99(values: list[float]) -> float:
    """The nearest-rank 99th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


class CanaryWatch:
    """One canary's outcomes within the window."""

    def __init__(self, thresholds: RollbackThresholds, clock: Callable[[], float] = time.monotonic) -> None:
        self._thresholds = thresholds
        self._clock = clock
        self._window: deque[_Observed] = deque()

    def record(self, outcome: RequestOutcome) -> str | None:
        """Take in one ended request; the reason to roll back if the window now breaks a threshold."""
        now = self._clock()
        self._window.append(_Observed(now, outcome.failed, outcome.time_to_first_token_s))
        while self._window and self._window[0].at < now - self._thresholds.window_s:
            self._window.popleft()
        count = len(self._window)
        if count < self._thresholds.min_requests:
            return None
        failures = sum(observed.failed for observed in self._window)
        if failures / count > self._thresholds.max_error_rate:
            return (f"{failures} of its last {count} requests failed, over auto_rollback_max_error_rate="
                    f"{self._thresholds.max_error_rate:g}")
        limit = self._thresholds.max_p99_ttft_s
        ttfts = [observed.time_to_first_token_s for observed in self._window
                 if observed.time_to_first_token_s is not None]
        if limit is not None and ttfts and (slowest := p99(ttfts)) > limit:
            return (f"its p99 time to first token over its last {len(ttfts)} requests is {slowest:.3f}s, over "
                    f"auto_rollback_max_p99_ttft_s={limit:g}")
        return None
