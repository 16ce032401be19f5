"""The bfloat16-weight CPU kernel, the linear method that calls it, and a bfloat16 checkpoint on either
kind of CPU: upcast to float32 (the kernel for small batches) matches transformers in float32 token for
token; computed natively in bfloat16 it matches transformers in bfloat16 to top-1 and a stated logprob
tolerance."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from autoglm import LLM, SamplingParams
from autoglm.kernels.cpu_extension import REQUIRED_CPU_FLAGS
from autoglm.models.linear import Linear
from autoglm.models.linear_method import SMALL_BATCH_ROWS, CpuBf16WeightLinearMethod, UnquantizedLinearMethod
from autoglm.platforms import cpu_has_flags
from tests.engine.reference import greedy_reference
from tests.tiny_models import make_tiny_checkpoint

needs_avx512 = pytest.mark.skipif(not cpu_has_flags(*REQUIRED_CPU_FLAGS), reason="the kernel needs AVX-512")
# bfloat16 keeps 8 significant bits, so two correct implementations that round in a different order
# differ by a few hundredths in log-probability (up to 0.03 seen on these models): a third of this.
BF16_LOGPROB_TOLERANCE = 0.1
PROMPTS = [[(7 * i + j) % 190 + 3 for j in range(5 + 3 * i)] for i in range(SMALL_BATCH_ROWS + 1)]
NUM_NEW_TOKENS = 16


@pytest.fixture
def kernel(cpu_kernels):
    return cpu_kernels.linear_bf16_weight


@pytest.fixture(params=["qwen2", "llama"])
def bf16_checkpoint(request, tmp_path):
    return make_tiny_checkpoint(request.param, tmp_path / request.param, dtype=torch.bfloat16)


def bf16_valued(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(torch.bfloat16)


def projections_of(llm: LLM) -> list[torch.nn.Module]:
    """Every projection of the engine's model, the LM head included."""
    return [module for module in llm.engine.runner.model.modules() if hasattr(module, "linear_method")]


@needs_avx512
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("out_features", [1, 7, 64, 131])  # tails of the 4-column blocks too
def test_kernel_equals_a_float32_matmul_on_the_widened_weights(kernel, rows, out_features):
    weight = bf16_valued(out_features, 96)
    x = torch.randn(rows, 96)
    torch.testing.assert_close(kernel(x, weight), F.linear(x, weight.float()), rtol=1e-5, atol=1e-5)


@needs_avx512
def test_kernel_takes_non_contiguous_activations(kernel):
    weight = bf16_valued(32, 64)
    x = torch.randn(64, 3).t()
    torch.testing.assert_close(kernel(x, weight), F.linear(x, weight.float()), rtol=1e-5, atol=1e-5)


@needs_avx512
def test_kernel_refuses_what_it_cannot_compute(kernel):
    with pytest.raises(RuntimeError, match="multiple of 16"):
        kernel(torch.randn(1, 24), bf16_valued(8, 24))
    with pytest.raises(RuntimeError, match="bfloat16"):
        kernel(torch.randn(1, 32), torch.randn(8, 32))


@needs_avx512
def test_the_method_takes_the_kernel_for_small_batches_only(kernel):
    method = CpuBf16WeightLinearMethod()
    layer = Linear(32, 16, True, method)
    layer.weight.copy_(bf16_valued(16, 32))
    layer.bias.copy_(torch.randn(16))
    method.process_weights_after_loading(layer)
    layer.weight.zero_()  # a float32 weight unlike the copy reveals which path ran
    small = torch.randn(SMALL_BATCH_ROWS, 32)
    torch.testing.assert_close(layer(small), F.linear(small, layer.weight_bf16.float(), layer.bias))
    large = torch.randn(SMALL_BATCH_ROWS + 1, 32)
    assert torch.equal(layer(large), F.linear(large, layer.weight, layer.bias))


@needs_avx512
def test_upcast_bfloat16_decodes_like_transformers_in_float32(cpu_without_bf16_units, cpu_kernels, bf16_checkpoint):
    """On a CPU without bfloat16 units (forced here) the checkpoint is computed in float32: single requests
    decode through the kernel, a batch of nine through the float32 matmul, both with transformers' float32
    tokens on the same weights."""
    reference = greedy_reference(bf16_checkpoint, PROMPTS, max_new_tokens=NUM_NEW_TOKENS)
    llm = LLM(model=str(bf16_checkpoint), dtype="bfloat16", cpu_upcast_half=True)
    assert llm.engine.dtype == torch.float32 and llm.engine.decode_weight_dtype == torch.bfloat16
    projections = projections_of(llm)
    assert all(isinstance(module.linear_method, CpuBf16WeightLinearMethod) for module in projections)
    assert all(module.weight_bf16 is not None for module in projections)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True)
    alone = [llm.generate([prompt], params, use_tqdm=False)[0] for prompt in PROMPTS[:2]]
    together = llm.generate(PROMPTS, params, use_tqdm=False)
    for i, output in enumerate(alone):
        assert output.outputs[0].token_ids == reference.token_ids[i], f"prompt {i} alone"
    for i, output in enumerate(together):
        assert output.outputs[0].token_ids == reference.token_ids[i], f"prompt {i} in a batch"


def test_native_bfloat16_agrees_with_transformers_in_bfloat16(bf16_checkpoint):
    """Computed in bfloat16 (in hardware where the CPU has the units, emulated by PyTorch elsewhere):
    every greedy token is transformers' top-1 given the same prefix, or within the tolerance of it,
    and its logprob is within the tolerance of transformers'."""
    llm = LLM(model=str(bf16_checkpoint), dtype="bfloat16", cpu_upcast_half=False)
    assert llm.engine.dtype == torch.bfloat16
    assert all(type(module.linear_method) is UnquantizedLinearMethod for module in projections_of(llm))
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    outputs = llm.generate(PROMPTS, params, use_tqdm=False)
    reference = AutoModelForCausalLM.from_pretrained(bf16_checkpoint, dtype=torch.bfloat16)
    for i, (prompt, output) in enumerate(zip(PROMPTS, outputs)):
        tokens = output.outputs[0].token_ids
        with torch.inference_mode():
            logits = reference(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1].float()
        expected = torch.log_softmax(logits, -1)
        for step, (token, position) in enumerate(zip(tokens, output.outputs[0].logprobs)):
            where = f"prompt {i} token {step}"
            assert expected[step].max() - expected[step, token] <= BF16_LOGPROB_TOLERANCE, f"{where}: not top-1"
            assert abs(position[token].logprob - expected[step, token]) <= BF16_LOGPROB_TOLERANCE, where
