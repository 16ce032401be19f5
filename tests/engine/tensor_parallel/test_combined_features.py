"""Tensor parallelism, int8 weights, an int8 KV cache and n-gram speculation at once, against transformers'
greedy tokens on the same int8 checkpoint (written by the compressed-tensors package, decompressed by
transformers: no dequantizing code of ours on the reference's side).

The weights are the same on both sides; the int8 cache is the one approximation, so the tolerance and the
near-tie rule are the compact cache's own (tests/engine/test_kv_cache_dtype.py): tokens equal up to a first
difference, which may fall only where the reference's top two log-probs lie within twice the tolerance.
"""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from tests.engine.reference import greedy_reference, parity_prompts
from tests.engine.test_kv_cache_dtype import LOGPROB_TOLERANCE
from tests.models.quantized_checkpoints import save_with_package_compressor
from tests.tiny_models import make_tiny_checkpoint

RANKS = 2
NUM_NEW_TOKENS = 16
NUM_PROMPTS = 4  # one small case: the features' own tests cover the breadth
INT8_CACHE_TOLERANCE = LOGPROB_TOLERANCE["int8"]


@pytest.mark.timeout(300)
def test_two_ranks_int8_weights_int8_cache_and_ngram_follow_transformers(tmp_path, restored_threads):
    float_dir = make_tiny_checkpoint("llama", tmp_path / "float")
    int8_dir = save_with_package_compressor(float_dir, 8, None, tmp_path / "int8")
    prompts = [prompt * 2 for prompt in parity_prompts()[:NUM_PROMPTS]]  # repeated, so that n-gram lookup finds matches
    reference = greedy_reference(int8_dir, prompts, NUM_NEW_TOKENS)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    speculative_config = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1}
    with LLM(model=str(int8_dir), dtype="float32", tensor_parallel_size=RANKS, kv_cache_dtype="int8",
             speculative_config=speculative_config) as llm:
        outputs = llm.generate(prompts, params, use_tqdm=False)
        assert llm.engine.get_stats().spec_decode.num_accepted_tokens > 0
    compared = 0
    for i, output in enumerate(outputs):
        completion = output.outputs[0]
        logprobs = [next(iter(position.values())).logprob for position in completion.logprobs]
        for step, (token, expected) in enumerate(zip(completion.token_ids, reference.token_ids[i])):
            if token != expected:
                assert reference.margins[i][step] < 2 * INT8_CACHE_TOLERANCE, (
                    f"prompt {i} token {step}: {token} instead of {expected}, whose lead was "
                    f"{reference.margins[i][step]:.3f} nats")
                break
            assert logprobs[step] == pytest.approx(reference.logprobs[i][step], abs=INT8_CACHE_TOLERANCE)
            compared += 1
    print(f"{compared} of {len(prompts) * NUM_NEW_TOKENS} tokens compared before a near tie parted the paths")
    # Here every token agrees; the float checkpoint's reference parts from this run on a third of them, so
    # the bar tells int8 weights from float ones while leaving room for a near tie another CPU may flip.
    assert compared >= len(prompts) * NUM_NEW_TOKENS * 7 // 8
