"""Under pipeline parallelism every stage keeps a host tier and block files of its own layers, and moves the blocks
each plan names: a prefix restored across two stages, from memory or after a restart from their files, gives the
logits of recomputing it in one process; a bad file of either stage drops its block on both."""
from __future__ import annotations

import pytest

from autoglm import LLM
from tests.engine.kv_tiers.parallel_restart import assert_restored_from_every_ranks_files
from tests.engine.kv_tiers.scenario import POOL_BLOCKS, block_bytes, make_llm

STAGES = 2  # of the tiny model's two layers, one a stage


@pytest.mark.timeout(300)
def test_two_stages_restore_a_prefix_from_their_host_tiers_and_after_a_restart_from_their_files(
        model_dir, reference, tmp_path, restored_threads):
    stage_block = block_bytes(model_dir) // STAGES  # a stage's share of a block: its own layers
    folder = tmp_path / "blocks"

    def make() -> LLM:
        llm = make_llm(model_dir, pipeline_parallel_size=STAGES, kv_cache_memory=POOL_BLOCKS * stage_block,
                       kv_offload_bytes=64 * stage_block, kv_disk_path=str(folder),
                       kv_disk_bytes=200 * (block_bytes(model_dir) + 512))
        assert llm.engine.block_manager.num_blocks == POOL_BLOCKS
        return llm

    assert_restored_from_every_ranks_files(make, reference, worker_rank=0)  # the engine's process is the last stage
