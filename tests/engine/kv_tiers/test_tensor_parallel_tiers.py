"""Under tensor parallelism every rank keeps a host tier of its own heads, and moves the blocks each plan names:
a prefix restored on two ranks gives the logits of recomputing it in one process."""
from __future__ import annotations

import pytest
import torch

from tests.engine.kv_tiers.scenario import (PREFIX_BLOCKS, RECOMPUTE_TOLERANCE, SECOND_TURN,
                                            first_turn_then_other_work, run_alone, tier, tiered_llm)


@pytest.mark.timeout(300)
def test_two_ranks_restore_a_prefix_from_their_host_tiers(model_dir, reference, restored_threads):
    with tiered_llm(model_dir, host_blocks=64, tensor_parallel_size=2) as llm:
        first_turn_then_other_work(llm.engine)
        logits, _ = run_alone(llm.engine, SECOND_TURN)
        assert tier(llm.engine, "host").hits == PREFIX_BLOCKS
    assert torch.allclose(logits, reference.recomputed, rtol=0, atol=RECOMPUTE_TOLERANCE)

