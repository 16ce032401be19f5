"""The engine on a CUDA GPU, graphs on and off: greedy parity with transformers for every family. Skipped
without CUDA.

float32 must match token for token, log-probs to 1e-4. bfloat16 rounds differently from a float32
reference, so a greedy path may part from it at a near tie and then differ everywhere: each prompt's
first token (the prefill's) must agree and its log-prob be within 0.05, and over all outputs at least
90% of tokens agree.
"""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.runner.padded_decode import decode_batch_sizes
from tests.engine.reference import greedy_reference, parity_prompts
from tests.tiny_models import TINY_ARCHITECTURES, make_tiny_checkpoint

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
NUM_NEW_TOKENS = 32
FLOAT32_LOGPROB_TOLERANCE = 1e-4
BFLOAT16_FIRST_LOGPROB_TOLERANCE = 0.05
BFLOAT16_TOKEN_AGREEMENT = 0.9
MAX_NUM_SEQS = 8


@pytest.fixture(scope="module", params=TINY_ARCHITECTURES)
def case(request, tmp_path_factory):
    model_dir = make_tiny_checkpoint(request.param, tmp_path_factory.mktemp(request.param))
    prompts = parity_prompts()
    return model_dir, prompts, greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)


def generate(model_dir, prompts, dtype: str, enforce_eager: bool):
    llm = LLM(model=str(model_dir), dtype=dtype, device="cuda", enforce_eager=enforce_eager,
              max_num_seqs=MAX_NUM_SEQS)
    padded = llm.engine.runner.padded_decode
    assert (padded.captured_batch_sizes if padded else []) == ([] if enforce_eager else
                                                               decode_batch_sizes(MAX_NUM_SEQS))
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    return [output.outputs[0] for output in llm.generate(prompts, params, use_tqdm=False)]


def chosen_logprobs(completion) -> list[float]:
    return [next(iter(position.values())).logprob for position in completion.logprobs]


@pytest.mark.parametrize("enforce_eager", [False, True], ids=["graphs", "eager"])
def test_float32_matches_transformers(case, enforce_eager):
    model_dir, prompts, reference = case
    for i, completion in enumerate(generate(model_dir, prompts, "float32", enforce_eager)):
        assert completion.token_ids == reference.token_ids[i], f"prompt {i}: tokens differ from transformers"
        for step, (a, b) in enumerate(zip(chosen_logprobs(completion), reference.logprobs[i])):
            assert abs(a - b) < FLOAT32_LOGPROB_TOLERANCE, f"prompt {i} token {step}: logprob {a} vs {b}"


@pytest.mark.parametrize("enforce_eager", [False, True], ids=["graphs", "eager"])
def test_bfloat16_agrees_with_transformers(case, enforce_eager):
    model_dir, prompts, reference = case
    completions = generate(model_dir, prompts, "bfloat16", enforce_eager)
    agreeing = total = 0
    for i, completion in enumerate(completions):
        assert completion.token_ids[0] == reference.token_ids[i][0], f"prompt {i}: first token differs"
        first_logprob = chosen_logprobs(completion)[0]
        assert abs(first_logprob - reference.logprobs[i][0]) < BFLOAT16_FIRST_LOGPROB_TOLERANCE, f"prompt {i}"
        agreeing += sum(a == b for a, b in zip(completion.token_ids, reference.token_ids[i]))
        total += len(reference.token_ids[i])
    assert agreeing / total >= BFLOAT16_TOKEN_AGREEMENT
