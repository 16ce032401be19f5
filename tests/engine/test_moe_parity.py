"""Mixture-of-experts models through the engine match transformers: greedy tokens, log-probs within 1e-4 and the
experts each prompt token is routed to, with chunked prefill, prefix-cache hits and preemption; a request's
routing and tokens do not depend on the requests beside it."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from autoglm import LLM, SamplingParams
from autoglm.models.expert_choices import ExpertChoices, record_expert_choices
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.engine.reference import greedy_reference, parity_prompts
from tests.tiny_models import MOE_ARCHITECTURES, make_tiny_checkpoint

NUM_NEW_TOKENS = 10
LOGPROB_TOLERANCE = 1e-4
# Alone or batched, PyTorch's float32 matmul sums a row in an order that depends on the batch's row count.
BATCHED_LOGPROB_TOLERANCE = 1e-5
PROMPT_INDICES = (1, 3, 6, 7)  # 9 to 48 tokens, three of them opening alike; none near a greedy tie
GREEDY = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)


@pytest.fixture(scope="module", params=MOE_ARCHITECTURES)
def case(request, tmp_path_factory):
    """A tiny checkpoint of one family, four prompts and the transformers reference."""
    model_dir = make_tiny_checkpoint(request.param, tmp_path_factory.mktemp(request.param))
    prompts = [parity_prompts()[index] for index in PROMPT_INDICES]
    return model_dir, prompts, greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)


def completions(outputs) -> list[tuple[list[int], list[float]]]:
    return [(output.outputs[0].token_ids, [next(iter(position.values())).logprob
                                           for position in output.outputs[0].logprobs]) for output in outputs]


def assert_matches(outputs, reference, tolerance: float = LOGPROB_TOLERANCE) -> None:
    for i, (tokens, logprobs) in enumerate(completions(outputs)):
        assert tokens == reference.token_ids[i], f"prompt {i}: tokens differ"
        for step, (a, b) in enumerate(zip(logprobs, reference.logprobs[i])):
            assert abs(a - b) < tolerance, f"prompt {i} token {step}: logprob {a} vs {b}"


def test_greedy_matches_transformers_then_again_from_the_prefix_cache(case):
    model_dir, prompts, reference = case
    llm = LLM(model=str(model_dir), dtype="float32")
    assert_matches(llm.generate(prompts, GREEDY, use_tqdm=False), reference)
    hits_before = llm.engine.block_manager.prefix_cache_hits
    assert_matches(llm.generate(prompts, GREEDY, use_tqdm=False), reference)
    assert llm.engine.block_manager.prefix_cache_hits > hits_before
    assert llm.engine.block_manager.num_referenced_blocks() == 0


def test_chunked_prefill_and_preemption(case):
    model_dir, prompts, reference = case
    probe = LLM(model=str(model_dir), dtype="float32", kv_cache_memory=1 << 20)
    llm = LLM(model=str(model_dir), dtype="float32", kv_cache_memory=kv_bytes_for_blocks(probe, 5),
              max_num_batched_tokens=7)
    assert_matches(llm.generate(prompts, GREEDY, use_tqdm=False), reference)
    assert llm.engine.scheduler.num_preemptions > 0
    assert llm.engine.block_manager.num_referenced_blocks() == 0


def prompt_routing(llm: LLM, prompt: list[int]) -> dict[str, ExpertChoices]:
    """Each router's choices for the prompt's tokens, the calls of its chunks joined."""
    with record_expert_choices(llm.engine.runner.model) as recorded:
        llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    return {name: ExpertChoices(torch.cat([call.hidden for call in calls]),
                                torch.cat([call.topk_ids for call in calls]),
                                torch.cat([call.topk_weights for call in calls])) for name, calls in recorded.items()}


def reference_routing(model_dir, prompt: list[int]) -> tuple[dict[str, nn.Module], dict[str, torch.Tensor]]:
    """transformers' routers, and the experts each chose for each prompt token."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    routers = {name: module for name, module in model.named_modules() if name.endswith("mlp.gate")}
    chosen = {}
    hooks = [router.register_forward_hook(lambda module, args, output, name=name: chosen.__setitem__(name, output[2]))
             for name, router in routers.items()]
    with torch.inference_mode():
        model(torch.tensor([prompt]))
    for hook in hooks:
        hook.remove()
    return routers, chosen


def test_prompt_tokens_choose_the_experts_transformers_chooses(case):
    model_dir, prompts, _ = case
    prompt = prompts[-1]  # 48 tokens, computed in chunks of 7
    engine = prompt_routing(LLM(model=str(model_dir), dtype="float32", max_num_batched_tokens=7), prompt)
    routers, chosen = reference_routing(model_dir, prompt)
    assert sorted(engine) == sorted(routers) and len(engine) == 2  # three layers, one of them dense
    for name, router in routers.items():
        ours = engine[name]
        assert ours.topk_ids.shape == (len(prompt), 2)
        assert torch.equal(ours.topk_ids.sort().values, chosen[name].sort().values), f"{name}: other experts"
        with torch.inference_mode():  # the same input rows through transformers' router
            _, weights, ids = router(ours.hidden)
        order, reference_order = ours.topk_ids.argsort(), ids.argsort()
        assert torch.equal(ours.topk_ids.gather(1, order), ids.gather(1, reference_order))
        torch.testing.assert_close(ours.topk_weights.gather(1, order), weights.float().gather(1, reference_order),
                                   rtol=1e-6, atol=1e-6)


def test_a_request_routes_and_decodes_alike_alone_and_in_a_batch(case):
    model_dir, prompts, reference = case
    llm = LLM(model=str(model_dir), dtype="float32", enable_prefix_caching=False)
    model = llm.engine.runner.model
    with record_expert_choices(model) as batched_routing:  # the first step holds every prompt, in order
        batched = completions(llm.generate(prompts, GREEDY, use_tqdm=False))
    for index, prompt in enumerate(prompts):
        with record_expert_choices(model) as alone_routing:
            [(tokens, logprobs)] = completions(llm.generate([prompt], GREEDY, use_tqdm=False))
        assert tokens == batched[index][0] == reference.token_ids[index], f"prompt {index}: tokens differ"
        assert max(abs(a - b) for a, b in zip(logprobs, batched[index][1])) < BATCHED_LOGPROB_TOLERANCE
        start = sum(len(earlier) for earlier in prompts[:index])
        for name, calls in batched_routing.items():
            batched_ids = calls[0].topk_ids[start:start + len(prompt)]
            assert torch.equal(batched_ids, alone_routing[name][0].topk_ids), f"prompt {index}: {name} differs"


def test_bfloat16_runs_and_mostly_agrees(case):
    model_dir, prompts, reference = case
    outputs = LLM(model=str(model_dir), dtype="bfloat16").generate(prompts, GREEDY, use_tqdm=False)
    first_tokens = [output.outputs[0].token_ids[0] for output in outputs]
    agreeing = sum(token == tokens[0] for token, tokens in zip(first_tokens, reference.token_ids))
    assert agreeing >= len(prompts) - 1
