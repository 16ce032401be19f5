"""Mixture-of-experts models on two ranks over gloo give one rank's greedy tokens, log-probs within 1e-5 in float32:
GLM-4.5 with expert parallelism (each rank holds half the routed experts whole, and half of the shared expert),
Qwen3-MoE without it (each rank holds half of every expert). Every other split is checked in one process
(``tests/models/test_moe_split.py``); settings that cannot split are refused by name before any worker starts."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from autoglm.models.fused_experts import FusedExperts
from tests.engine.reference import parity_prompts
from tests.tiny_models import make_tiny_checkpoint, tiny_config

RANKS = 2
NUM_NEW_TOKENS = 8
LOGPROB_TOLERANCE = 1e-5  # the ranks' partial sums are added in another order than one rank adds them
GREEDY = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
PROMPT_INDICES = (1, 3, 6)  # 9 to 40 tokens: read in several chunks of 16


def completions(outputs) -> list[tuple[list[int], list[float]]]:
    return [(output.outputs[0].token_ids, [next(iter(position.values())).logprob
                                           for position in output.outputs[0].logprobs]) for output in outputs]


def held_experts(llm: LLM) -> set[tuple[tuple[int, ...], int]]:
    """Rank 0's experts of each sparse layer, and the rows of each it holds."""
    return {(module.placement.local_experts, module.gate_up_proj.shape[1])
            for module in llm.engine.runner.model.modules() if isinstance(module, FusedExperts)}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("arch", "expert_parallel", "rank0_holds"), [
    pytest.param("glm4_moe", True, {((0, 1, 2, 3), 2 * 32)}, id="glm4_moe-expert-parallel"),
    pytest.param("qwen3_moe", False, {(tuple(range(8)), 2 * 16)}, id="qwen3_moe-tensor-parallel"),
])
def test_two_ranks_match_one_rank(arch, expert_parallel, rank0_holds, tmp_path, restored_threads):
    model_dir = make_tiny_checkpoint(arch, tmp_path / arch)
    prompts = [parity_prompts()[index] for index in PROMPT_INDICES]
    expected = completions(LLM(model=str(model_dir), dtype="float32").generate(prompts, GREEDY, use_tqdm=False))
    with LLM(model=str(model_dir), dtype="float32", tensor_parallel_size=RANKS, max_num_batched_tokens=16,
             enable_expert_parallel=expert_parallel) as llm:
        assert held_experts(llm) == rank0_holds
        got = completions(llm.generate(prompts, GREEDY, use_tqdm=False))
    for i, ((tokens, logprobs), (expected_tokens, expected_logprobs)) in enumerate(zip(got, expected)):
        assert tokens == expected_tokens, f"prompt {i}: tokens differ from one rank's"
        for step, (a, b) in enumerate(zip(logprobs, expected_logprobs)):
            assert abs(a - b) < LOGPROB_TOLERANCE, f"prompt {i} token {step}: logprob {a} vs {b}"


@pytest.mark.parametrize(("settings", "checkpoint", "message"), [
    ({"enable_expert_parallel": True}, {}, "needs tensor_parallel_size of 2 or more, got 1"),
    ({"enable_expert_parallel": True, "tensor_parallel_size": 16}, {"num_attention_heads": 16},
     r"tensor_parallel_size \(16\) must be at most the model's 8 routed experts"),
    ({"tensor_parallel_size": 4}, {"moe_intermediate_size": 30},
     r"does not divide the model's moe_intermediate_size \(30\); .*unless enable_expert_parallel is on"),
], ids=["expert-parallel-on-one-rank", "more-ranks-than-experts", "experts-that-do-not-slice"])
def test_splits_that_cannot_work_are_refused_before_any_worker_starts(settings, checkpoint, message, tmp_path):
    tiny_config("qwen3_moe", **checkpoint).save_pretrained(tmp_path)  # the settings are refused from it alone
    with pytest.raises(ValueError, match=message):
        LLM(model=str(tmp_path), dtype="float32", **settings)
