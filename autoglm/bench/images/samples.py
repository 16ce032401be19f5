"""Repeated timings of one measure, written as a median and the range around it."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Samples:
    values: list[float]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("a measure needs at least one sample; raise --num-iters")

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.values, "median": self.median, "min": min(self.values), "max": max(self.values)}
