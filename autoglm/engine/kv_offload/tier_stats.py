"""Each KV tier's counters, as a snapshot the metrics read."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

# Seconds: a host copy of a few blocks takes microseconds, a disk read of one block a millisecond or more.
RESTORE_LATENCY_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


@dataclass
class LatencyHistogram:
    """Observations per bucket of RESTORE_LATENCY_BUCKETS_S, the last count for those above every bound."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(RESTORE_LATENCY_BUCKETS_S) + 1))
    sum_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(RESTORE_LATENCY_BUCKETS_S, seconds)] += 1
        self.sum_s += seconds


@dataclass
class TierStats:
    """One tier's counters: blocks found and not found by prefix lookups, bytes held, moved in and out."""

    tier: str  # 'host' or 'disk'
    hits: int = 0  # blocks restored from this tier
    misses: int = 0  # admitted lookups that reached this tier and did not find their next block there
    bytes_stored: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    blocks_dropped: int = 0  # block files refused on read: corrupt, truncated or foreign
    restore_latency: LatencyHistogram = field(default_factory=LatencyHistogram)  # host: per step; disk: per block

    def snapshot(self) -> TierStats:
        return replace(self, restore_latency=replace(self.restore_latency, counts=list(self.restore_latency.counts)))
