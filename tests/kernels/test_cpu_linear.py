"""The bfloat16-weight CPU kernel: the same float32 sums as a float32 matmul, and greedy parity."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from autoglm import LLM, SamplingParams
from autoglm.kernels.cpu_extension import REQUIRED_CPU_FLAGS, load_cpu_kernels
from autoglm.kernels.cpu_linear import SMALL_BATCH_ROWS, linear
from autoglm.platforms import cpu_has_flags
from tests.engine.reference import greedy_reference
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.skipif(not cpu_has_flags(*REQUIRED_CPU_FLAGS), reason="the kernel needs AVX-512")


@pytest.fixture(scope="module")
def kernel():
    """Built here (or found in PyTorch's cache); on an AVX-512 CPU a failed build is a failure."""
    built = load_cpu_kernels()
    assert built is not None, "the CPU kernels did not build; see the warning logged"
    return built.linear_bf16_weight


def bf16_valued(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(torch.bfloat16)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 9])
@pytest.mark.parametrize("out_features", [1, 7, 64, 131])  # tails of the 4-column blocks too
def test_kernel_equals_a_float32_matmul_on_the_widened_weights(kernel, rows, out_features):
    weight = bf16_valued(out_features, 96)
    x = torch.randn(rows, 96)
    torch.testing.assert_close(kernel(x, weight), F.linear(x, weight.float()), rtol=1e-5, atol=1e-5)


def test_kernel_takes_non_contiguous_activations(kernel):
    weight = bf16_valued(32, 64)
    x = torch.randn(64, 3).t()
    torch.testing.assert_close(kernel(x, weight), F.linear(x, weight.float()), rtol=1e-5, atol=1e-5)


def test_kernel_refuses_what_it_cannot_compute(kernel):
    with pytest.raises(RuntimeError, match="multiple of 16"):
        kernel(torch.randn(1, 24), bf16_valued(8, 24))
    with pytest.raises(RuntimeError, match="bfloat16"):
        kernel(torch.randn(1, 32), torch.randn(8, 32))


def test_only_small_batches_take_the_kernel(kernel):
    weight_bf16 = bf16_valued(16, 32)
    weight = torch.zeros(16, 32)  # a different float32 weight reveals which path ran
    bias = torch.randn(16)
    small = torch.randn(SMALL_BATCH_ROWS, 32)
    torch.testing.assert_close(linear(small, weight, bias, weight_bf16), F.linear(small, weight_bf16.float(), bias))
    large = torch.randn(SMALL_BATCH_ROWS + 1, 32)
    assert torch.equal(linear(large, weight, bias, weight_bf16), F.linear(large, weight, bias))


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_bfloat16_checkpoint_decodes_like_transformers_in_float32(kernel, arch, tmp_path):
    """A bfloat16 checkpoint upcast on this CPU: single requests decode through the kernel, a batch of
    nine through the float32 matmul, and both give transformers' float32 tokens on the same weights."""
    model_dir = make_tiny_checkpoint(arch, tmp_path / arch, dtype=torch.bfloat16)
    prompts = [[(7 * i + j) % 190 + 3 for j in range(5 + 3 * i)] for i in range(SMALL_BATCH_ROWS + 1)]
    reference = greedy_reference(model_dir, prompts, max_new_tokens=16)
    llm = LLM(model=str(model_dir), dtype="bfloat16", cpu_upcast_half=True)
    assert all(module.weight_bf16 is not None for module in llm.engine.runner.model.projections())
    params = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
    alone = [llm.generate([prompt], params, use_tqdm=False)[0] for prompt in prompts[:2]]
    together = llm.generate(prompts, params, use_tqdm=False)
    for i, output in enumerate(alone):
        assert output.outputs[0].token_ids == reference.token_ids[i], f"prompt {i} alone"
    for i, output in enumerate(together):
        assert output.outputs[0].token_ids == reference.token_ids[i], f"prompt {i} in a batch"
