"""An engine whose steps stop once a number of requests have finished, until the test lets them go on: batch
lines held in flight however fast or slow the machine, never by sleeping."""
from __future__ import annotations

import threading
from collections.abc import Callable

from autoglm.outputs import RequestOutput

# A hang guard: a test that never opens the gate still ends.
HELD_AT_MOST_S = 120.0

Step = Callable[[], list[RequestOutput]]


class EngineGate:
    """Counts the requests the wrapped step finishes; once `after` have, holds every later step until `open`.
    `holding` is set while a step waits (a request is then stuck in the engine)."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.finished = 0
        self.holding = threading.Event()
        self._opened = threading.Event()

    def wrap(self, step: Step) -> Step:
        def gated_step() -> list[RequestOutput]:
            if self.finished >= self.after and not self._opened.is_set():
                self.holding.set()
                self._opened.wait(HELD_AT_MOST_S)
            outputs = step()
            self.finished += sum(output.finished for output in outputs)
            return outputs

        return gated_step

    def open(self) -> None:
        self._opened.set()
