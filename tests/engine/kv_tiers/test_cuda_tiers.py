"""On a CUDA GPU, with async scheduling and decode graphs as they are by default there: blocks restored from pinned
host memory and from disk give the logits of an in-memory prefix hit, bit for bit. Skipped without CUDA."""
from __future__ import annotations

import pytest
import torch

from tests.engine.kv_tiers.scenario import (FIRST_TURN, PREFIX_BLOCKS, SECOND_TURN, first_turn_then_other_work,
                                            make_llm, run_alone, tier, tiered_llm)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_restored_blocks_on_cuda_give_the_logits_of_a_prefix_hit(model_dir, tmp_path):
    roomy = make_llm(model_dir, device="cuda").engine
    run_alone(roomy, FIRST_TURN)
    prefix_hit, _ = run_alone(roomy, SECOND_TURN)
    for host_blocks, disk_path, source in ((64, None, "host"), (12, tmp_path / "blocks", "disk")):
        engine = tiered_llm(model_dir, host_blocks, disk_path, device="cuda").engine
        assert engine.runner.host_tier.values.is_pinned()
        first_turn_then_other_work(engine)
        logits, _ = run_alone(engine, SECOND_TURN)
        assert tier(engine, source).hits == PREFIX_BLOCKS
        assert torch.equal(logits, prefix_hit)
