"""Two ranks on gloo give transformers' greedy tokens, log-probs within 1e-4, for every architecture, with
prompts read in chunks, prefix-cache hits and preemption in the mix."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.engine.reference import greedy_reference, parity_prompts
from tests.engine.test_parity import NUM_NEW_TOKENS, assert_matches
from tests.tiny_models import TINY_ARCHITECTURES, make_tiny_checkpoint

RANKS = 2
POOL_BLOCKS = 12  # fewer than the eight prompts need at once: some are preempted


# Each architecture with 4 heads and 2 KV heads (one KV head per rank), and a grouped-query model with
# fewer KV heads than ranks (its one KV head on both).
CASES = [pytest.param(arch, {}, 2, id=arch) for arch in TINY_ARCHITECTURES] + [
    pytest.param("qwen3", {"num_key_value_heads": 1}, 1, id="qwen3-one-kv-head")]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("arch", "overrides", "kv_split"), CASES)
def test_two_ranks_match_transformers_through_chunks_prefix_hits_and_preemption(arch, overrides, kv_split, tmp_path,
                                                                                restored_threads):
    model_dir = make_tiny_checkpoint(arch, tmp_path / arch, **overrides)
    prompts = parity_prompts()
    reference = greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)
    probe = LLM(model=str(model_dir), dtype="float32", kv_cache_memory=1 << 20)
    per_rank_memory = kv_bytes_for_blocks(probe, POOL_BLOCKS) // kv_split  # the KV heads a rank holds
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    with LLM(model=str(model_dir), dtype="float32", tensor_parallel_size=RANKS, max_num_batched_tokens=16,
             kv_cache_memory=per_rank_memory) as llm:
        assert llm.engine.block_manager.num_blocks == POOL_BLOCKS
        first = llm.generate(prompts, params, use_tqdm=False)
        assert llm.engine.scheduler.num_preemptions > 0
        second = llm.generate(prompts, params, use_tqdm=False)
        assert sum(output.num_cached_tokens for output in second) > 0
    assert_matches(first, reference)
    assert_matches(second, reference)


@pytest.mark.timeout(300)
def test_ngram_speculation_on_two_ranks_keeps_the_tokens(tmp_path, restored_threads):
    """The plan already carries several tokens and sampled positions per row: n-gram speculation needs no more."""
    model_dir = make_tiny_checkpoint("llama", tmp_path / "llama")
    prompts = [prompt * 2 for prompt in parity_prompts()]  # repeated, so that lookup finds matches
    reference = greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    speculative_config = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1}
    with LLM(model=str(model_dir), dtype="float32", tensor_parallel_size=RANKS,
             speculative_config=speculative_config) as llm:
        outputs = llm.generate(prompts, params, use_tqdm=False)
        assert llm.engine.get_stats().spec_decode.num_accepted_tokens > 0
    assert_matches(outputs, reference)


@pytest.mark.timeout(300)
def test_async_scheduling_on_two_ranks_keeps_the_tokens(tmp_path, restored_threads):
    """Every rank fills a plan's deferred tokens from its own samples, which are the same on every rank."""
    model_dir = make_tiny_checkpoint("llama", tmp_path / "llama")
    prompts = parity_prompts()
    reference = greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    with LLM(model=str(model_dir), dtype="float32", tensor_parallel_size=RANKS, async_scheduling=True) as llm:
        launch, deferred = llm.engine.runner.launch, []

        def recording_launch(plan):
            deferred.append(bool(plan.deferred_positions))
            return launch(plan)

        llm.engine.runner.launch = recording_launch
        outputs = llm.generate(prompts, params, use_tqdm=False)
    assert any(deferred)
    assert_matches(outputs, reference)
