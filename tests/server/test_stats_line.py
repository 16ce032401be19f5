"""The periodic stats line says the tensor-parallel degree where there is one."""
from __future__ import annotations

import dataclasses

from autoglm.engine.stats import EngineStats
from autoglm.server.stats_logger import stats_line

IDLE = EngineStats(num_running=0, num_waiting=0, kv_cache_usage=0.0, kv_cache_dtype="auto",
                   kv_cache_capacity_tokens=64, kv_cache_bytes_per_token=8.0, prefix_cache_queries=0,
                   prefix_cache_hits=0, num_preemptions=0, prompt_tokens_total=0, generation_tokens_total=0)


def test_the_line_names_the_ranks_only_under_tensor_parallelism():
    assert "tensor parallel" not in stats_line(IDLE, IDLE, 1.0)
    two_ranks = dataclasses.replace(IDLE, tensor_parallel_size=2)
    assert stats_line(two_ranks, two_ranks, 1.0).endswith(", tensor parallel: 2 ranks")
