"""The clock batches are timed by (created, the 24-hour window, retention) and how a line waits out a
Retry-After: the real ones, except in tests that drive time themselves."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class BatchClock:
    now: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
