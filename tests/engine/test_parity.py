"""Greedy tokens and logprobs match transformers for every family and every engine setting."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.engine.reference import greedy_reference, parity_prompts
from tests.tiny_models import TINY_ARCHITECTURES, make_tiny_checkpoint

NUM_NEW_TOKENS = 32
LOGPROB_TOLERANCE = 1e-4


@pytest.fixture(scope="module", params=TINY_ARCHITECTURES)
def case(request, tmp_path_factory):
    """A tiny checkpoint of one family, eight prompts and the transformers reference."""
    model_dir = make_tiny_checkpoint(request.param, tmp_path_factory.mktemp(request.param))
    prompts = parity_prompts()
    return model_dir, prompts, greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)


def run(model_dir, prompts, **settings):
    llm = LLM(model=str(model_dir), dtype="float32", **settings)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    return llm, llm.generate(prompts, params, use_tqdm=False)


def assert_matches(outputs, reference):
    for i, output in enumerate(outputs):
        completion = output.outputs[0]
        assert completion.token_ids == reference.token_ids[i], f"prompt {i}: tokens differ from transformers"
        got = [next(iter(position.values())).logprob for position in completion.logprobs]
        for step, (a, b) in enumerate(zip(got, reference.logprobs[i])):
            assert abs(a - b) < LOGPROB_TOLERANCE, f"prompt {i} token {step}: logprob {a} vs {b}"


def test_default_settings(case):
    model_dir, prompts, reference = case
    llm, outputs = run(model_dir, prompts)
    assert_matches(outputs, reference)
    assert llm.engine.block_manager.num_referenced_blocks() == 0


def test_prefix_cache_hits(case):
    model_dir, prompts, reference = case
    llm, first = run(model_dir, prompts)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    hits_before = llm.engine.block_manager.prefix_cache_hits
    second = llm.generate(prompts, params, use_tqdm=False)
    assert llm.engine.block_manager.prefix_cache_hits > hits_before
    assert sum(output.num_cached_tokens for output in second) > 0
    assert_matches(first, reference)
    assert_matches(second, reference)


def test_chunked_prefill_with_a_tiny_budget(case):
    model_dir, prompts, reference = case
    _, outputs = run(model_dir, prompts, max_num_batched_tokens=7)
    assert_matches(outputs, reference)


@pytest.mark.parametrize("block_size", [1, 32])
def test_block_sizes(case, block_size):
    model_dir, prompts, reference = case
    _, outputs = run(model_dir, prompts, block_size=block_size)
    assert_matches(outputs, reference)


def test_preemption_under_a_tiny_kv_pool(case):
    model_dir, prompts, reference = case
    probe = LLM(model=str(model_dir), dtype="float32", kv_cache_memory=1 << 20)
    llm, outputs = run(model_dir, prompts, kv_cache_memory=kv_bytes_for_blocks(probe, 6), max_num_batched_tokens=64)
    assert llm.engine.scheduler.num_preemptions > 0
    assert_matches(outputs, reference)
    assert llm.engine.block_manager.num_referenced_blocks() == 0


def test_contiguous_kv_layout(case):
    model_dir, prompts, reference = case
    llm, outputs = run(model_dir, prompts, use_paged_attention=False, max_context_len=128)
    assert not llm.engine.block_manager.enable_prefix_caching
    assert_matches(outputs, reference)
