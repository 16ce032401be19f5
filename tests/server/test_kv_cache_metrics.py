"""/metrics says how many tokens the KV cache holds, what one costs, and in which kv_cache_dtype."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from autoglm.engine.stats import EngineStats
from autoglm.server.metrics import ServerMetrics


def test_kv_cache_capacity_bytes_per_token_and_dtype_are_exported():
    stats = EngineStats(num_running=0, num_waiting=0, kv_cache_usage=0.0, kv_cache_dtype="int8",
                        kv_cache_capacity_tokens=4096, kv_cache_bytes_per_token=544.0, prefix_cache_queries=0,
                        prefix_cache_hits=0, num_preemptions=0, prompt_tokens_total=0, generation_tokens_total=0)
    samples = {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
               for family in text_string_to_metric_families(ServerMetrics("m", lambda: {"m": stats}).render().decode())
               for sample in family.samples}
    model = (("model_name", "m"),)
    assert samples[("autoglm:kv_cache_capacity_tokens", model)] == 4096
    assert samples[("autoglm:kv_cache_bytes_per_token", model)] == 544.0
    assert samples[("autoglm:cache_config_info", (("cache_dtype", "int8"), ("model_name", "m")))] == 1
    assert samples[("autoglm:tensor_parallel_size", model)] == 1
