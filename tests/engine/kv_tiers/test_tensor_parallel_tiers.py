"""Under tensor parallelism every rank keeps a host tier and block files of its own heads, and moves the blocks
each plan names: a prefix restored on two ranks, from memory or after a restart from their files, gives the logits
of recomputing it in one process; a bad file of either rank drops its block on both."""
from __future__ import annotations

import pytest

from tests.engine.kv_tiers.parallel_restart import assert_restored_from_every_ranks_files
from tests.engine.kv_tiers.scenario import tiered_llm


@pytest.mark.timeout(300)
def test_two_ranks_restore_a_prefix_from_their_host_tiers_and_after_a_restart_from_their_files(
        model_dir, reference, tmp_path, restored_threads):
    folder = tmp_path / "blocks"
    assert_restored_from_every_ranks_files(
        lambda: tiered_llm(model_dir, host_blocks=64, disk_path=folder, tensor_parallel_size=2), reference,
        worker_rank=1)
