"""The engine with int8/int4 weights generates what transformers generates with the weights the compressed-tensors
package quantizes and dequantizes (no code of the engine's builds that reference), and a compressed-tensors checkpoint written by the package itself generates what quantize-at-load does."""
from __future__ import annotations

import random

import pytest

from autoglm import LLM, SamplingParams
from tests.engine.reference import greedy_reference
from tests.models.quantized_checkpoints import save_dequantized_reference, save_with_package_compressor
from tests.tiny_models import make_tiny_checkpoint

NUM_PROMPTS, NUM_NEW_TOKENS = 8, 32
# float32 activations both sides: the integer kernels differ from the float reference only in summation order.
LOGPROB_TOLERANCE = 1e-4
CASES = {  # name -> (bits, group size, family)
    "int8-channel-qwen2": (8, None, "qwen2"),
    "int8-group32-glm4": (8, 32, "glm4"),
    "int4-group32-llama": (4, 32, "llama"),
}


def prompts() -> list[list[int]]:
    rng = random.Random(3)
    return [[rng.randrange(3, 300) for _ in range(length)] for length in (1, 3, 8, 13, 16, 17, 33, 64)][:NUM_PROMPTS]


def generate(model_dir, token_prompts, **settings):
    llm = LLM(model=str(model_dir), dtype="float32", device="cpu", **settings)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    return [output.outputs[0] for output in llm.generate(token_prompts, params, use_tqdm=False)]


@pytest.mark.parametrize("case", CASES)
def test_engine_matches_transformers_with_the_packages_dequantized_weights(case: str, tmp_path) -> None:
    bits, group_size, family = CASES[case]
    model_dir = make_tiny_checkpoint(family, tmp_path / "float")
    reference_dir = save_dequantized_reference(model_dir, bits, group_size, tmp_path / "dequantized")
    token_prompts = prompts()
    reference = greedy_reference(reference_dir, token_prompts, NUM_NEW_TOKENS)
    completions = generate(model_dir, token_prompts, quantization=f"int{bits}", quantization_group_size=group_size)
    for i, completion in enumerate(completions):
        assert completion.token_ids == reference.token_ids[i], f"prompt {i}: tokens differ from the reference"
        got = [next(iter(position.values())).logprob for position in completion.logprobs]
        assert max(abs(a - b) for a, b in zip(got, reference.logprobs[i])) < LOGPROB_TOLERANCE


@pytest.mark.parametrize("bits,group_size", [(8, None), (8, 32), (4, 32)])
def test_package_written_checkpoint_generates_what_quantize_at_load_does(bits: int, group_size: int | None,
                                                                         tmp_path) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path / "float")
    compressed_dir = save_with_package_compressor(model_dir, bits, group_size, tmp_path / "compressed")
    token_prompts = prompts()
    from_checkpoint = generate(compressed_dir, token_prompts)
    at_load = generate(model_dir, token_prompts, quantization=f"int{bits}", quantization_group_size=group_size)
    assert [c.token_ids for c in from_checkpoint] == [c.token_ids for c in at_load]
