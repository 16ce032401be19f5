"""Sessions sharing the prefix and other prompts all at once, in a pool that holds one of them: blocks are evicted,
saved, restored and preempted in the same steps, and every request still generates what it does in a roomy pool."""
from __future__ import annotations

from autoglm import SamplingParams
from tests.engine.kv_tiers.scenario import (FIRST_TURN, OTHER_PROMPTS, PREFIX, SECOND_TURN, make_llm, tier,
                                            tiered_llm)

PARAMS = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
SHORT = [prompt[:14] for prompt in OTHER_PROMPTS]  # admitted beside a long one, whose decode then needs their blocks
PROMPTS = [FIRST_TURN, SHORT[0], *OTHER_PROMPTS[:2], SHORT[1], SECOND_TURN, PREFIX + [7, 8, 9], SECOND_TURN]


def test_sessions_run_together_in_a_small_pool_generate_what_they_do_in_a_roomy_one(model_dir, tmp_path):
    expected = [output.outputs[0].token_ids for output in make_llm(model_dir).generate(PROMPTS, PARAMS,
                                                                                        use_tqdm=False)]
    llm = tiered_llm(model_dir, host_blocks=12, disk_path=tmp_path / "blocks")
    outputs = llm.generate(PROMPTS, PARAMS, use_tqdm=False)
    assert [output.outputs[0].token_ids for output in outputs] == expected
    llm.engine.block_manager.check_invariants()
    llm.engine.kv_offload.check_invariants()
    assert llm.engine.block_manager.num_referenced_blocks() == 0
    assert tier(llm.engine, "host").hits > 0 and tier(llm.engine, "disk").hits > 0
    assert llm.engine.get_stats().num_preemptions > 0
