"""Wall-clock timing of work on a device: accelerators run asynchronously, so a timer must
wait for the queued kernels, and a kernel of a few microseconds must be repeated to be seen."""
from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from autoglm.platforms import synchronize


def timed_seconds(work: Callable[[], object], device: torch.device) -> float:
    """Seconds ``work`` takes until its device work is done."""
    synchronize(device)
    start = time.perf_counter()
    work()
    synchronize(device)
    return time.perf_counter() - start


def best_seconds_per_call(work: Callable[[], object], device: torch.device, repeats: int, min_round_s: float) -> float:
    """The fastest of ``repeats`` rounds, in seconds per call, after one warm-up call.

    Each round calls ``work`` often enough to last about ``min_round_s``, so launch overhead
    and timer resolution do not swamp short kernels; the best round is the one least disturbed.
    """
    timed_seconds(work, device)
    calls = max(1, math.ceil(min_round_s / max(timed_seconds(work, device), 1e-9)))

    def round_of_calls() -> None:
        for _ in range(calls):
            work()

    return min(timed_seconds(round_of_calls, device) for _ in range(repeats)) / calls
