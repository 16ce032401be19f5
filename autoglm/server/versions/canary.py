"""A canary split: a fixed share of a model's traffic goes to a candidate version, chosen by a hash of who
asks, so one conversation stays on one version and the split is the same on every replica."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

# Hash buckets: the percent is honoured to a hundredth of a point.
_BUCKETS = 10_000


def routing_bucket(routing_key: str) -> int:
    """A stable bucket in [0, 10000) for the request's `user` field (else its request id)."""
    digest = hashlib.sha256(routing_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % _BUCKETS


@dataclass(frozen=True)
class CanarySplit:
    """`percent` (0-100] of the model's traffic goes to `version`."""

    version: str
    percent: float

    def takes(self, routing_key: str) -> bool:
        return routing_bucket(routing_key) < round(self.percent * _BUCKETS / 100)
