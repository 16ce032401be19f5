"""The engine's load and counters as one snapshot, read by metrics and logs without touching the engine."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.engine.kv_offload.tier_stats import TierStats
from autoglm.engine.speculative.metrics import SpecDecodeStats


@dataclass
class EngineStats:
    """A snapshot of the engine's load and counters, for metrics and logs."""

    num_running: int  # requests with a sequence in the running batch
    num_waiting: int  # the other unfinished requests
    kv_cache_usage: float
    kv_cache_dtype: str
    kv_cache_capacity_tokens: int
    kv_cache_bytes_per_token: float  # every layer's K and V of one token, scales included
    prefix_cache_queries: int
    prefix_cache_hits: int
    num_preemptions: int
    prompt_tokens_total: int
    generation_tokens_total: int
    tensor_parallel_size: int = 1  # processes the model is split across
    num_failed_steps: int = 0  # steps that raised (see step_isolation)
    spec_decode: SpecDecodeStats | None = None  # None: speculative decoding is off
    kv_tiers: list[TierStats] = field(default_factory=list)  # host memory, then disk; empty: no tiers
