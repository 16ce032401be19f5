"""What the response cache did for a request, as its x-autoglm-cache header tells the client."""
from __future__ import annotations

from enum import Enum

CACHE_HEADER = "x-autoglm-cache"


class CacheOutcome(str, Enum):
    HIT = "hit"  # answered from the cache; the engine did not run
    MISS = "miss"  # deterministic but not cached: the engine answered, and a complete answer is kept
    BYPASS = "bypass"  # sampled without a seed, so the answer is not fixed: never looked up nor kept
