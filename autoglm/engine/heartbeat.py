"""Whether an engine thread is stuck: it has work (a step to run, requests to add) but no step has ended
for a while. ``/health`` answers 503 on it (``engine_stall_timeout_s``), so that a load balancer or an
orchestrator stops sending requests to an engine that cannot serve them, and can restart it."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class EngineHeartbeat:
    """Written by the engine thread, read from anywhere (one attribute store or load each)."""

    clock: Callable[[], float] = time.monotonic
    busy_since: float | None = None  # the last step's end, or when work woke the thread; None while it sleeps

    def sleeping(self) -> None:
        """The thread waits for work: nothing is late."""
        self.busy_since = None

    def woke(self) -> None:
        """Work came to a thread that was sleeping."""
        if self.busy_since is None:
            self.busy_since = self.clock()

    def beat(self) -> None:
        """A step ended."""
        self.busy_since = self.clock()

    def stalled_for(self) -> float:
        """Seconds the thread has had work and ended no step; 0 while it sleeps."""
        busy_since = self.busy_since
        return 0.0 if busy_since is None else max(0.0, self.clock() - busy_since)
