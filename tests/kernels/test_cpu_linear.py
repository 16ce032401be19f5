"""Every CPU linear kernel, on any machine: each one this CPU runs against a float reference and, in the
engine, a bfloat16 checkpoint through it against transformers (float32 kernels token for token with
transformers in float32; the bfloat16 kernel by top-1 agreement and a stated logprob tolerance with
transformers in bfloat16). A kernel this CPU cannot run is skipped with the flags it lacks. Each test pins
its kernel and its row limit, so no measurement changes what it checks."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from autoglm import LLM, SamplingParams
from autoglm.kernels.linear_kernels import CPU_LINEAR_KERNELS, CpuLinearKernel
from autoglm.models.linear import Linear
from autoglm.models.linear_method import CpuKernelLinearMethod, FixedRowLimit, UnquantizedLinearMethod
from tests.engine.reference import greedy_reference
from tests.tiny_models import make_tiny_checkpoint

# bfloat16 keeps 8 significant bits, so two correct implementations that round in a different order
# differ by a few hundredths in log-probability (up to 0.03 seen on these models): a third of this.
BF16_LOGPROB_TOLERANCE = 0.1
MAX_ROWS = 8
PROMPTS = [[(7 * i + j) % 190 + 3 for j in range(5 + 3 * i)] for i in range(MAX_ROWS + 1)]
NUM_NEW_TOKENS = 16
FLOAT32_KERNELS = [kernel for kernel in CPU_LINEAR_KERNELS if kernel.activation_dtype == torch.float32]
BF16_KERNELS = [kernel for kernel in CPU_LINEAR_KERNELS if kernel.activation_dtype == torch.bfloat16]


def runnable(kernel: CpuLinearKernel) -> CpuLinearKernel:
    if not kernel.runs_here():
        pytest.skip(f"{kernel.name} needs CPU flags this CPU lacks (or hides): {', '.join(kernel.missing_flags())}")
    return kernel


@pytest.fixture(params=CPU_LINEAR_KERNELS, ids=lambda kernel: kernel.name)
def kernel(request, cpu_kernels) -> CpuLinearKernel:
    return runnable(request.param)


@pytest.fixture(params=["qwen2", "llama"])
def bf16_checkpoint(request, tmp_path):
    return make_tiny_checkpoint(request.param, tmp_path / request.param, dtype=torch.bfloat16)


def bf16_valued(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(torch.bfloat16)


def reference(kernel: CpuLinearKernel, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None):
    """float32 sums of the exact products; a bfloat16 kernel's result is that, rounded to bfloat16."""
    y = F.linear(x.float(), weight.float(), bias)
    return y.to(kernel.activation_dtype)


def assert_matches_reference(kernel: CpuLinearKernel, y: torch.Tensor, expected: torch.Tensor) -> None:
    if kernel.activation_dtype == torch.float32:
        torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    else:  # the same float32 sum in another order, then one rounding to 8 bits: one bfloat16 step apart at most
        torch.testing.assert_close(y.float(), expected.float(), rtol=2 ** -7, atol=1e-3)


def projections_of(llm: LLM) -> list[torch.nn.Module]:
    """Every projection of the engine's model, the LM head included."""
    return [module for module in llm.engine.runner.model.modules() if hasattr(module, "linear_method")]


@pytest.mark.cpu_isa
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, 9, 33])
@pytest.mark.parametrize("out_features", [1, 7, 64, 131])  # tails of the 4-column blocks too
def test_kernel_equals_float_sums_of_its_inputs(kernel, rows, out_features):
    weight = bf16_valued(out_features, 96)
    x = torch.randn(rows, 96).to(kernel.activation_dtype)
    assert_matches_reference(kernel, kernel(x, weight), reference(kernel, x, weight))


@pytest.mark.cpu_isa
@pytest.mark.parametrize("rows", [2, 3, 5, 9, 17])
def test_each_row_is_computed_as_it_would_be_alone(kernel, rows):
    """Bitwise: a speculative verification's rows must get what their decode steps of one row got."""
    weight = bf16_valued(131, 96)
    x = torch.randn(rows, 96).to(kernel.activation_dtype)
    together = kernel(x, weight)
    assert all(torch.equal(together[row], kernel(x[row : row + 1], weight)[0]) for row in range(rows))


@pytest.mark.cpu_isa
def test_kernel_adds_the_bias_and_takes_non_contiguous_activations(kernel):
    weight, bias = bf16_valued(32, 64), torch.randn(32).to(kernel.activation_dtype)
    x = torch.randn(64, 3).t().to(kernel.activation_dtype)
    assert not x.is_contiguous()
    assert_matches_reference(kernel, kernel(x, weight, bias), reference(kernel, x, weight, bias.float()))


@pytest.mark.cpu_isa
def test_kernel_refuses_what_it_cannot_compute(kernel):
    odd = kernel.k_multiple + kernel.k_multiple // 2
    with pytest.raises(RuntimeError, match=f"multiple of {kernel.k_multiple}"):
        kernel(torch.randn(1, odd).to(kernel.activation_dtype), bf16_valued(8, odd))
    with pytest.raises(RuntimeError, match="bfloat16"):
        kernel(torch.randn(1, 32).to(kernel.activation_dtype), torch.randn(8, 32))
    assert not kernel.reads(bf16_valued(8, odd)) and kernel.reads(bf16_valued(8, 2 * kernel.k_multiple))


@pytest.mark.cpu_isa
def test_the_method_takes_the_kernel_up_to_its_row_limit_only(kernel):
    method = CpuKernelLinearMethod(kernel, FixedRowLimit(MAX_ROWS))
    layer = Linear(64, 16, True, method).to(kernel.activation_dtype)
    layer.weight.copy_(bf16_valued(16, 64))
    layer.bias.copy_(torch.randn(16))
    method.process_weights_after_loading(layer)
    kernel_weight = layer.kernel_weight.clone()
    layer.weight.zero_()  # for the float32 kernels, a weight unlike the copy reveals which path ran
    layer.kernel_weight.copy_(kernel_weight)
    small = torch.randn(MAX_ROWS, 64).to(kernel.activation_dtype)
    assert method.path(layer, small) == kernel.name
    assert_matches_reference(kernel, layer(small), reference(kernel, small, kernel_weight, layer.bias.float()))
    large = torch.randn(MAX_ROWS + 1, 64).to(kernel.activation_dtype)
    assert method.path(layer, large) == "torch"
    assert torch.equal(layer(large), F.linear(large, layer.weight, layer.bias))


@pytest.mark.parametrize("kernel", FLOAT32_KERNELS, ids=lambda kernel: kernel.name)
def test_upcast_bfloat16_decodes_like_transformers_in_float32(cpu_without_bf16_units, cpu_kernels, bf16_checkpoint,
                                                              kernel):
    """On a CPU without bfloat16 units (forced here) the checkpoint is computed in float32: single requests
    decode through the kernel, a batch of nine through the float32 matmul, both with transformers' float32
    tokens on the same weights."""
    runnable(kernel)
    expected = greedy_reference(bf16_checkpoint, PROMPTS, max_new_tokens=NUM_NEW_TOKENS)
    llm = LLM(model=str(bf16_checkpoint), dtype="bfloat16", cpu_upcast_half=True, cpu_linear_kernel=kernel.name,
              cpu_kernel_max_rows=MAX_ROWS)
    assert llm.engine.dtype == torch.float32 and llm.engine.decode_weight_dtype == torch.bfloat16
    projections = projections_of(llm)
    assert all(module.linear_method.kernel is kernel and module.kernel_weight is not None for module in projections)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True)
    alone = [llm.generate([prompt], params, use_tqdm=False)[0] for prompt in PROMPTS[:2]]
    together = llm.generate(PROMPTS, params, use_tqdm=False)
    for i, output in enumerate(alone):
        assert output.outputs[0].token_ids == expected.token_ids[i], f"prompt {i} alone"
    for i, output in enumerate(together):
        assert output.outputs[0].token_ids == expected.token_ids[i], f"prompt {i} in a batch"


def assert_agrees_with_transformers_in_bfloat16(llm: LLM, checkpoint) -> None:
    """Every greedy token is transformers' top-1 given the same prefix, or within the tolerance of it,
    and its logprob is within the tolerance of transformers'."""
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    outputs = llm.generate(PROMPTS, params, use_tqdm=False)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16)
    for i, (prompt, output) in enumerate(zip(PROMPTS, outputs)):
        tokens = output.outputs[0].token_ids
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1:-1].float()
        expected = torch.log_softmax(logits, -1)
        for step, (token, position) in enumerate(zip(tokens, output.outputs[0].logprobs)):
            where = f"prompt {i} token {step}"
            assert expected[step].max() - expected[step, token] <= BF16_LOGPROB_TOLERANCE, f"{where}: not top-1"
            assert abs(position[token].logprob - expected[step, token]) <= BF16_LOGPROB_TOLERANCE, where


@pytest.mark.cpu_isa
@pytest.mark.parametrize("kernel", BF16_KERNELS, ids=lambda kernel: kernel.name)
def test_native_bfloat16_through_the_kernel_agrees_with_transformers_in_bfloat16(cpu_kernels, bf16_checkpoint,
                                                                                 kernel):
    runnable(kernel)
    llm = LLM(model=str(bf16_checkpoint), dtype="bfloat16", cpu_linear_kernel=kernel.name,
              cpu_kernel_max_rows=MAX_ROWS)
    assert llm.engine.dtype == torch.bfloat16
    assert all(module.linear_method.kernel is kernel for module in projections_of(llm))
    assert_agrees_with_transformers_in_bfloat16(llm, bf16_checkpoint)


@pytest.mark.cpu_isa
def test_native_bfloat16_through_pytorch_agrees_with_transformers_in_bfloat16(bf16_checkpoint):
    """Computed in bfloat16 by PyTorch alone (in hardware where the CPU has the units, emulated elsewhere)."""
    llm = LLM(model=str(bf16_checkpoint), dtype="bfloat16", cpu_upcast_half=False, cpu_linear_kernel="torch")
    assert llm.engine.dtype == torch.bfloat16
    assert all(type(module.linear_method) is UnquantizedLinearMethod for module in projections_of(llm))
    assert_agrees_with_transformers_in_bfloat16(llm, bf16_checkpoint)
