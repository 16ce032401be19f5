"""Sizing a test engine's KV pool in blocks rather than bytes."""
from __future__ import annotations

from autoglm import LLM
from autoglm.runner.kv_cache import bytes_per_block


def kv_bytes_for_blocks(llm: LLM, num_blocks: int) -> int:
    """The ``kv_cache_memory`` that gives an engine like ``llm`` (same model, dtype, block size) ``num_blocks`` blocks."""
    runner = llm.engine.runner
    return num_blocks * bytes_per_block(runner.model, llm.config.block_size, llm.engine.dtype, runner.kv_pool.format)
