"""/metrics shows each KV tier's hits, misses, bytes and restore latency, read from a running engine's statistics."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from autoglm.server.observability.metrics import ServerMetrics
from tests.engine.kv_tiers.scenario import (PREFIX_BLOCKS, SECOND_TURN, first_turn_then_other_work, run_alone,
                                            tiered_llm)


def test_each_tier_is_exported_with_its_label(model_dir, tmp_path):
    engine = tiered_llm(model_dir, host_blocks=12, disk_path=tmp_path / "blocks").engine
    first_turn_then_other_work(engine)
    run_alone(engine, SECOND_TURN)
    text = ServerMetrics("m", lambda: {"m": engine.get_stats()}).render().decode()
    samples = {(sample.name, sample.labels.get("tier"), sample.labels.get("le")): sample.value
               for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name.startswith("autoglm:kv_tier")}
    assert samples[("autoglm:kv_tier_hits_total", "disk", None)] == PREFIX_BLOCKS
    assert samples[("autoglm:kv_tier_hits_total", "host", None)] == 0
    assert samples[("autoglm:kv_tier_misses_total", "host", None)] >= PREFIX_BLOCKS
    assert samples[("autoglm:kv_tier_stored_bytes", "host", None)] > 0
    assert samples[("autoglm:kv_tier_written_bytes_total", "disk", None)] > 0
    assert samples[("autoglm:kv_tier_read_bytes_total", "disk", None)] > 0
    assert samples[("autoglm:kv_tier_dropped_blocks_total", "disk", None)] == 0
    assert samples[("autoglm:kv_tier_restore_seconds_count", "disk", None)] == PREFIX_BLOCKS
    assert samples[("autoglm:kv_tier_restore_seconds_bucket", "disk", "+Inf")] == PREFIX_BLOCKS
    assert samples[("autoglm:kv_tier_restore_seconds_count", "host", None)] >= 1
