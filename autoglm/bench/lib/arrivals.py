"""When each request is sent: a seeded gamma process, Poisson at burstiness 1, all at once at rate inf.

Gaps between requests are gamma-distributed with shape ``burstiness`` and mean ``1 / rate``,
as in vLLM's benchmark: below 1 requests come in bursts, above 1 more evenly, and the mean
request rate stays the same either way.
"""
from __future__ import annotations

import math
import random


def send_times(num_requests: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Seconds after the start at which each request goes out; the first at 0."""
    if rate <= 0:
        raise ValueError(f"the request rate must be positive, got {rate}")
    if burstiness <= 0:
        raise ValueError(f"the burstiness must be positive, got {burstiness}")
    if math.isinf(rate):
        return [0.0] * num_requests
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    times, now = [], 0.0
    for _ in range(num_requests):
        times.append(now)
        now += rng.gammavariate(burstiness, scale)
    return times
