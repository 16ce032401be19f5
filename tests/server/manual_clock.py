"""A clock the test moves by hand, for rate-limit windows that must not depend on how fast the machine is."""
from __future__ import annotations

from dataclasses import dataclass

# The first second of a minute (not of a day): a window of either length is under way, none about to end.
START = 1_800_000_000.0


@dataclass
class ManualClock:
    now: float = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
