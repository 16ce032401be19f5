"""Under pipeline parallelism every stage keeps a host tier of its own layers and moves the blocks each plan names:
a prefix restored across two stages gives the logits of recomputing it in one process."""
from __future__ import annotations

import pytest
import torch

from tests.engine.kv_tiers.scenario import (POOL_BLOCKS, PREFIX_BLOCKS, RECOMPUTE_TOLERANCE, SECOND_TURN, block_bytes,
                                            first_turn_then_other_work, make_llm, run_alone, tier)

STAGES = 2  # of the tiny model's two layers, one a stage


@pytest.mark.timeout(300)
def test_two_stages_restore_a_prefix_from_their_host_tiers(model_dir, reference, restored_threads):
    stage_block = block_bytes(model_dir) // STAGES  # a stage's share of a block: its own layers
    with make_llm(model_dir, pipeline_parallel_size=STAGES, kv_cache_memory=POOL_BLOCKS * stage_block,
                  kv_offload_bytes=64 * stage_block) as llm:
        assert llm.engine.block_manager.num_blocks == POOL_BLOCKS
        first_turn_then_other_work(llm.engine)
        logits, _ = run_alone(llm.engine, SECOND_TURN)
        assert tier(llm.engine, "host").hits == PREFIX_BLOCKS
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)


def test_the_disk_tier_is_refused_under_pipeline_parallelism(model_dir, tmp_path, restored_threads):
    with pytest.raises(ValueError, match="kv_disk_path needs tensor_parallel_size and pipeline_parallel_size 1"):
        make_llm(model_dir, pipeline_parallel_size=STAGES, kv_offload_bytes=64 * block_bytes(model_dir),
                 kv_disk_path=str(tmp_path / "blocks"))
