"""A periodic line of engine statistics while the server is busy, silent while idle."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from autoglm.engine.stats import EngineStats

logger = logging.getLogger("autoglm.stats")


def stats_line(previous: EngineStats, current: EngineStats, elapsed_s: float) -> str:
    """Throughput over the interval, load now, the interval's prefix-cache hit rate, and the tensor-parallel
    degree where there is one."""
    prompt_rate = (current.prompt_tokens_total - previous.prompt_tokens_total) / elapsed_s
    generation_rate = (current.generation_tokens_total - previous.generation_tokens_total) / elapsed_s
    queries = current.prefix_cache_queries - previous.prefix_cache_queries
    hits = current.prefix_cache_hits - previous.prefix_cache_hits
    hit_rate = hits / queries if queries else 0.0
    return (
        f"prompt throughput: {prompt_rate:.1f} tokens/s, generation throughput: {generation_rate:.1f} tokens/s, "
        f"running: {current.num_running} reqs, waiting: {current.num_waiting} reqs, "
        f"KV cache usage: {current.kv_cache_usage:.1%}, prefix cache hit rate: {hit_rate:.1%}"
        + (f", tensor parallel: {current.tensor_parallel_size} ranks" if current.tensor_parallel_size > 1 else "")
    )


def _is_busy(previous: EngineStats, current: EngineStats) -> bool:
    moved = (current.prompt_tokens_total, current.generation_tokens_total) != (
        previous.prompt_tokens_total, previous.generation_tokens_total)
    return moved or current.num_running > 0 or current.num_waiting > 0


async def log_engine_stats(read_stats: Callable[[], EngineStats | None], interval_s: float) -> None:
    """Every `interval_s`, log one stats line if the engine did or holds any work; runs until cancelled."""
    previous, since = read_stats(), time.monotonic()
    while True:
        await asyncio.sleep(interval_s)
        current, now = read_stats(), time.monotonic()
        if previous is not None and current is not None and _is_busy(previous, current):
            logger.info(stats_line(previous, current, now - since))
        previous, since = current, now
