"""/metrics carries vLLM's spec_decode counters when speculative decoding is on, and none when it is off."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from autoglm.engine.stats import EngineStats
from autoglm.engine.speculative.metrics import SpecDecodeStats
from autoglm.server.metrics import ServerMetrics


def scrape(spec_decode: SpecDecodeStats | None) -> dict:
    stats = EngineStats(num_running=0, num_waiting=0, kv_cache_usage=0.0, kv_cache_dtype="auto",
                        kv_cache_capacity_tokens=64, kv_cache_bytes_per_token=8.0, prefix_cache_queries=0,
                        prefix_cache_hits=0, num_preemptions=0, prompt_tokens_total=0, generation_tokens_total=0,
                        spec_decode=spec_decode)
    text = ServerMetrics("m", lambda: {"m": stats}).render().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_acceptance_counters_are_exported():
    spec = SpecDecodeStats()
    spec.record(3, 2)
    spec.record(3, 1)
    samples = scrape(spec)
    model = (("model_name", "m"),)
    assert samples[("autoglm:spec_decode_num_drafts_total", model)] == 2
    assert samples[("autoglm:spec_decode_num_draft_tokens_total", model)] == 6
    assert samples[("autoglm:spec_decode_num_accepted_tokens_total", model)] == 3
    per_position = {labels: value for (name, labels), value in samples.items()
                    if name == "autoglm:spec_decode_num_accepted_tokens_per_pos_total"}
    assert per_position == {(("model_name", "m"), ("position", str(i))): count for i, count in enumerate([2, 1, 0])}


def test_no_spec_decode_counters_when_it_is_off():
    assert not any(name.startswith("autoglm:spec_decode") for name, _ in scrape(None))
