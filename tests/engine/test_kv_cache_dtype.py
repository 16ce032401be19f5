"""An engine with a compact KV cache generates what the engine with a compute-dtype cache does, within a
stated logprob tolerance, and holds the tokens its bytes per token promise.

Tolerances, measured on these tiny models (qwen2 and llama; deliberately sharp random weights, so
errors run larger than on a trained model's) and kept with headroom: an int8 cache moves each element by
at most half a step of its (token, head) scale, 1/254 of the head's largest magnitude; over 8 prompts x 32
tokens that moved a chosen token's logprob by 0.008 nats at the median and 0.056 at most, so 0.15 holds
with ~2.7x margin and still fails on a real fault (a wrong scale or slot moves logprobs by nats).
fp8_e4m3 keeps 3 mantissa bits (elements off by up to 6%, unscaled): 0.03 median, 0.19 at most, hence 0.5.

Near-ties: once the compact run's chosen token and the compute-dtype run's disagree, the two sequences
differ and nothing after is comparable. They may disagree only where the reference's top two logprobs are
closer than twice the tolerance (a tie the quantization may flip); every position up to there must match.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from autoglm import LLM, SamplingParams
from autoglm.runner.kv_cache import bytes_per_block
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.tiny_models import make_tiny_checkpoint

NUM_NEW_TOKENS = 32
PROMPT_LENGTHS = (3, 9, 16, 17, 25, 33, 40, 48)
LOGPROB_TOLERANCE = {"int8": 0.15, "fp8_e4m3": 0.5}


@dataclass
class Generated:
    token_ids: list[int]
    logprobs: list[float]  # of each chosen token
    margins: list[float]  # chosen minus runner-up logprob


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """A tiny checkpoint, eight prompts (every other one sharing a 20-token head) and the compute-dtype run."""
    model_dir = make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))
    rng = random.Random(1)
    shared = [rng.randrange(3, 200) for _ in range(20)]
    prompts = [
        (shared if i % 2 else [])[:length] + [rng.randrange(3, 200) for _ in range(length - min(length, 20) * (i % 2))]
        for i, length in enumerate(PROMPT_LENGTHS)
    ]
    return model_dir, prompts, generate(LLM(model=str(model_dir), dtype="float32"), prompts)


def generate(llm: LLM, prompts: list[list[int]]) -> list[Generated]:
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=2)
    results = []
    for output in llm.generate(prompts, params, use_tqdm=False):
        completion = output.outputs[0]
        logprobs, margins = [], []
        for token, position in zip(completion.token_ids, completion.logprobs):
            runner_up = max(entry.logprob for other, entry in position.items() if other != token)
            logprobs.append(position[token].logprob)
            margins.append(position[token].logprob - runner_up)
        results.append(Generated(completion.token_ids, logprobs, margins))
    return results


def assert_close_to(got: list[Generated], reference: list[Generated], tolerance: float) -> None:
    for i, (ours, theirs) in enumerate(zip(got, reference)):
        for step, (token, expected) in enumerate(zip(ours.token_ids, theirs.token_ids)):
            if token != expected:
                assert theirs.margins[step] < 2 * tolerance, (
                    f"prompt {i} token {step}: {token} instead of {expected}, whose lead was "
                    f"{theirs.margins[step]:.3f} nats, more than the tolerance lets flip")
                break
            assert abs(ours.logprobs[step] - theirs.logprobs[step]) < tolerance, (
                f"prompt {i} token {step}: logprob {ours.logprobs[step]} vs {theirs.logprobs[step]}")


@pytest.mark.parametrize("kv_cache_dtype", ["int8", "fp8_e4m3"])
def test_compact_cache_matches_the_compute_dtype_cache(case, kv_cache_dtype):
    model_dir, prompts, reference = case
    llm = LLM(model=str(model_dir), dtype="float32", kv_cache_dtype=kv_cache_dtype)
    assert_close_to(generate(llm, prompts), reference, LOGPROB_TOLERANCE[kv_cache_dtype])


@pytest.mark.parametrize("block_size", [1, 32])
def test_int8_cache_across_block_sizes(case, block_size):
    model_dir, prompts, reference = case
    llm = LLM(model=str(model_dir), dtype="float32", kv_cache_dtype="int8", block_size=block_size)
    assert_close_to(generate(llm, prompts), reference, LOGPROB_TOLERANCE["int8"])


def test_int8_cache_with_prefix_hits_chunks_and_preemption(case):
    """Prefixes read back from int8 blocks (hits and chunked prefill), and recomputation after preemption."""
    model_dir, prompts, reference = case
    probe = LLM(model=str(model_dir), dtype="float32", kv_cache_dtype="int8", kv_cache_memory=1 << 20)
    llm = LLM(model=str(model_dir), dtype="float32", kv_cache_dtype="int8",
              kv_cache_memory=kv_bytes_for_blocks(probe, 6), max_num_batched_tokens=24)
    first = generate(llm, prompts)
    second = generate(llm, prompts)
    assert llm.engine.scheduler.num_preemptions > 0
    assert llm.engine.block_manager.prefix_cache_hits > 0
    assert_close_to(first, reference, LOGPROB_TOLERANCE["int8"])
    assert_close_to(second, reference, LOGPROB_TOLERANCE["int8"])
    assert llm.engine.block_manager.num_referenced_blocks() == 0


@pytest.mark.parametrize("kv_cache_dtype", ["int8", "fp8_e5m2"])
def test_a_prompt_scores_the_same_in_one_chunk_and_in_many(case, kv_cache_dtype):
    """A chunk attends to its own K/V as later chunks read them from the cache, so chunking changes nothing
    but float rounding (without that, the difference is the quantization error, ~0.01 nats)."""
    model_dir, prompts, _ = case
    params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
    scores = []
    for chunk in (2048, 5):
        llm = LLM(model=str(model_dir), dtype="float32", kv_cache_dtype=kv_cache_dtype, max_num_batched_tokens=chunk)
        output = llm.generate([prompts[-1]], params, use_tqdm=False)[0]
        scores.append([next(iter(position.values())).logprob for position in output.prompt_logprobs[1:]])
    assert scores[0] == pytest.approx(scores[1], abs=1e-4)


@pytest.mark.cpu_isa
def test_an_8_bit_cache_holds_about_twice_the_tokens_of_a_16_bit_one(tmp_path):
    """Same kv_cache_memory, head_dim 64 in bfloat16: 128 bytes per token and head against 64 + a 4-byte scale."""
    model_dir = make_tiny_checkpoint("llama", tmp_path, head_dim=64)
    budget = 1 << 20
    engines = {name: LLM(model=str(model_dir), dtype="bfloat16", cpu_upcast_half=False, kv_cache_memory=budget,
                         kv_cache_dtype=name) for name in ("auto", "int8", "fp8_e5m2")}
    tokens = {name: llm.engine.block_manager.num_blocks * llm.config.block_size for name, llm in engines.items()}
    assert tokens["int8"] / tokens["auto"] == pytest.approx(128 / 68, rel=0.02)
    assert tokens["fp8_e5m2"] / tokens["auto"] == pytest.approx(2, rel=0.02)
    for name, llm in engines.items():
        runner = llm.engine.runner
        per_block = bytes_per_block(runner.model, llm.config.block_size, llm.engine.dtype, runner.kv_pool.format)
        assert runner.kv_pool.num_bytes == llm.engine.block_manager.num_blocks * per_block <= budget, name
        stats = llm.engine.get_stats()
        assert stats.kv_cache_bytes_per_token == per_block / llm.config.block_size
        assert (stats.kv_cache_capacity_tokens, stats.kv_cache_dtype) == (tokens[name], name)
