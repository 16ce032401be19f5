"""Blocks restored from host memory or from disk give the logits of an in-memory prefix hit, bit for bit, and
those of recomputing the prefix within float32's rounding; the counters say which tier served them."""
from __future__ import annotations

import torch

from tests.engine.kv_tiers.scenario import (FIRST_TURN, PREFIX_BLOCKS, RECOMPUTE_TOLERANCE, SECOND_TURN,
                                            first_turn_then_other_work, make_llm, run_alone, tier, tiered_llm)


def test_a_prefix_the_pool_evicted_comes_back_from_host_memory(model_dir, reference):
    engine = tiered_llm(model_dir, host_blocks=64).engine
    first_turn_then_other_work(engine)
    logits, num_cached = run_alone(engine, SECOND_TURN)
    assert num_cached == len(SECOND_TURN) - 6
    assert tier(engine, "host").hits == PREFIX_BLOCKS
    assert torch.equal(logits, reference.prefix_hit)
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)


def test_a_prefix_the_host_tier_passed_down_comes_back_from_disk(model_dir, reference, tmp_path):
    engine = tiered_llm(model_dir, host_blocks=12, disk_path=tmp_path / "blocks").engine
    first_turn_then_other_work(engine)
    logits, _ = run_alone(engine, SECOND_TURN)
    host, disk = tier(engine, "host"), tier(engine, "disk")
    assert (host.hits, disk.hits) == (0, PREFIX_BLOCKS)
    assert disk.bytes_read > 0 and disk.bytes_written > 0 and disk.blocks_dropped == 0
    assert sum(disk.restore_latency.counts) == PREFIX_BLOCKS
    assert torch.equal(logits, reference.prefix_hit)
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)


def test_a_lookup_that_misses_every_tier_is_counted_once_per_tier(model_dir, tmp_path):
    engine = tiered_llm(model_dir, host_blocks=12, disk_path=tmp_path / "blocks").engine
    _, num_cached = run_alone(engine, SECOND_TURN)
    assert num_cached == 0
    assert (tier(engine, "host").misses, tier(engine, "disk").misses) == (1, 1)


def test_an_int8_cache_comes_back_from_disk_with_its_scales(model_dir, tmp_path):
    roomy = make_llm(model_dir, kv_cache_dtype="int8").engine
    run_alone(roomy, FIRST_TURN)
    prefix_hit, _ = run_alone(roomy, SECOND_TURN)
    engine = tiered_llm(model_dir, host_blocks=12, disk_path=tmp_path / "blocks", kv_cache_dtype="int8").engine
    first_turn_then_other_work(engine)
    logits, _ = run_alone(engine, SECOND_TURN)
    assert tier(engine, "disk").hits == PREFIX_BLOCKS
    assert torch.equal(logits, prefix_hit)
