"""The disk tier outlives its engine: a new engine on the same folder reads a known prefix from disk on its first
request; and a tenant's salt keys its blocks there as in the pool, so no other tenant ever reads them."""
from __future__ import annotations

import torch

from autoglm.engine.sequence import TenantTag
from tests.engine.kv_tiers.scenario import (PREFIX_BLOCKS, SECOND_TURN, first_turn_then_other_work,
                                            run_alone, tier, tiered_llm)


def test_a_restarted_engine_reads_a_known_prefix_from_disk_first(model_dir, reference, tmp_path):
    folder = tmp_path / "blocks"
    before = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    first_turn_then_other_work(before)
    before.close()  # the host tier's blocks go down to disk
    after = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    logits, num_cached = run_alone(after, SECOND_TURN)
    assert num_cached == len(SECOND_TURN) - 6
    assert tier(after, "disk").hits == PREFIX_BLOCKS
    assert torch.equal(logits, reference.prefix_hit)


def test_tenant_b_never_reads_tenant_a_blocks_on_disk(model_dir, tmp_path):
    folder = tmp_path / "blocks"
    writer = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    first_turn_then_other_work(writer, TenantTag("a"))
    writer.close()
    reader = tiered_llm(model_dir, host_blocks=64, disk_path=folder).engine
    _, num_cached = run_alone(reader, SECOND_TURN, TenantTag("b"))
    assert num_cached == 0 and tier(reader, "disk").hits == 0
    _, num_cached = run_alone(reader, SECOND_TURN)  # nor a request without a tenant
    assert num_cached == 0 and tier(reader, "disk").hits == 0
    _, num_cached = run_alone(reader, SECOND_TURN, TenantTag("a"))
    assert num_cached == len(SECOND_TURN) - 6 and tier(reader, "disk").hits == PREFIX_BLOCKS
