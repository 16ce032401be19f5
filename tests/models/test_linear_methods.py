"""Linear methods: what each creates, computes and post-processes, how one is chosen per model,
and that the LM head's method is its own, tied to the embedding or not."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from autoglm.models import load_model
from autoglm.models.linear import Linear, LMHead, MergedLinear
from autoglm.models.linear_method import (
    SMALL_BATCH_ROWS,
    CpuBf16WeightLinearMethod,
    LinearMethods,
    UnquantizedLinearMethod,
    linear_methods_for,
)
from autoglm.models.linear_method import cpu_bf16_weight
from autoglm.models.parameters import StackedRowsWeightLoader
from tests.tiny_models import make_tiny_checkpoint

CPU = torch.device("cpu")


class RecordingMethod(UnquantizedLinearMethod):
    """Unquantized, noting each layer it post-processes."""

    def __init__(self) -> None:
        self.processed: list[torch.nn.Module] = []

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self.processed.append(layer)


class FakeKernels:
    """Stands in for the compiled kernels: the same result, and a count of the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def linear_bf16_weight(self, x: torch.Tensor, weight_bf16: torch.Tensor) -> torch.Tensor:
        assert weight_bf16.dtype == torch.bfloat16
        self.calls += 1
        return F.linear(x, weight_bf16.float())


@pytest.fixture
def fake_kernels(monkeypatch) -> FakeKernels:
    kernels = FakeKernels()
    monkeypatch.setattr(cpu_bf16_weight, "cpu_kernels", lambda: kernels)
    return kernels


@pytest.fixture
def no_kernels(monkeypatch) -> None:
    monkeypatch.setattr(cpu_bf16_weight, "cpu_kernels", lambda: None)


def loaded_linear(method, in_features: int = 32, out_features: int = 16) -> Linear:
    """A layer of bfloat16-valued float32 weights (as upcast from a bfloat16 checkpoint), post-processed."""
    layer = Linear(in_features, out_features, True, method)
    layer.weight.copy_(torch.randn(out_features, in_features).to(torch.bfloat16))
    layer.bias.copy_(torch.randn(out_features))
    method.process_weights_after_loading(layer)
    return layer


def test_unquantized_creates_a_stacked_weight_in_the_dtype_asked() -> None:
    layer = MergedLinear(6, {"gate_proj": 4, "up_proj": 4}, False, UnquantizedLinearMethod())
    assert layer.weight.shape == (8, 6) and layer.weight.dtype == torch.get_default_dtype()
    assert layer.weight.weight_loader == StackedRowsWeightLoader((4, 4)) and layer.bias is None
    UnquantizedLinearMethod().create_weights(layer, 6, (3,), torch.bfloat16)
    assert layer.weight.shape == (3, 6) and layer.weight.dtype == torch.bfloat16


def test_unquantized_applies_x_w_transposed_plus_bias() -> None:
    layer = loaded_linear(UnquantizedLinearMethod())
    x = torch.randn(3, 32)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))


def test_output_sizes_must_add_up() -> None:
    with pytest.raises(ValueError, match=r"output_sizes \(4, 4\) sum to 8, not out_features 9"):
        Linear(6, 9, False, UnquantizedLinearMethod(), output_sizes=(4, 4))


def test_cpu_method_keeps_an_exact_bfloat16_copy_where_the_kernel_can_read_it() -> None:
    method = CpuBf16WeightLinearMethod()
    layer = loaded_linear(method)
    assert layer.weight_bf16.dtype == torch.bfloat16 and torch.equal(layer.weight_bf16.float(), layer.weight)
    assert loaded_linear(method, in_features=24).weight_bf16 is None  # not a multiple of 16


def test_cpu_method_runs_small_batches_through_the_kernel(fake_kernels) -> None:
    layer = loaded_linear(CpuBf16WeightLinearMethod())
    layer.weight.zero_()  # a float32 weight unlike the copy reveals which path ran
    small = torch.randn(SMALL_BATCH_ROWS, 32)
    assert torch.equal(layer(small), F.linear(small, layer.weight_bf16.float()) + layer.bias)
    assert fake_kernels.calls == 1
    for other in (torch.randn(SMALL_BATCH_ROWS + 1, 32), torch.randn(1, 1, 32)):  # many rows; not 2-D
        assert torch.equal(layer(other), F.linear(other, layer.weight, layer.bias))
    assert fake_kernels.calls == 1


def test_cpu_method_without_the_kernels_is_the_float32_matmul(no_kernels) -> None:
    method = CpuBf16WeightLinearMethod()
    layer = loaded_linear(method)
    layer.weight.zero_()
    x = torch.randn(1, 32)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    assert method.decode_weight_dtype(torch.float32) == torch.float32


def test_cpu_method_reads_bfloat16_once_the_kernels_load(fake_kernels) -> None:
    assert CpuBf16WeightLinearMethod().decode_weight_dtype(torch.float32) == torch.bfloat16
    assert UnquantizedLinearMethod().decode_weight_dtype(torch.float32) == torch.float32


@pytest.mark.parametrize(
    ("device", "dtype", "requested", "kernel", "expected"),
    [
        ("cpu", torch.float32, torch.bfloat16, True, CpuBf16WeightLinearMethod),
        ("cpu", torch.float32, torch.bfloat16, False, UnquantizedLinearMethod),  # off, or no kernel coming
        ("cpu", torch.bfloat16, torch.bfloat16, True, UnquantizedLinearMethod),  # computed natively
        ("cpu", torch.float32, torch.float16, True, UnquantizedLinearMethod),  # the kernel reads bfloat16 only
        ("cpu", torch.float32, torch.float32, True, UnquantizedLinearMethod),
        ("meta", torch.float32, torch.bfloat16, True, UnquantizedLinearMethod),  # not a CPU
    ],
)
def test_the_cpu_method_is_chosen_only_for_an_upcast_bfloat16_checkpoint(device, dtype, requested, kernel,
                                                                          expected) -> None:
    methods = linear_methods_for(torch.device(device), dtype, requested, cpu_bf16_weight_kernel=kernel)
    assert type(methods.layers) is expected and type(methods.lm_head) is expected


@pytest.mark.parametrize("tied", [False, True])
def test_loading_post_processes_each_projection_with_its_method_and_the_head_with_its_own(tmp_path: Path,
                                                                                        tied: bool) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path, tie_word_embeddings=tied)
    layers, head = RecordingMethod(), RecordingMethod()
    model, config = load_model(model_dir, torch.float32, CPU, linear_methods=LinearMethods(layers, head))
    linears = [module for module in model.modules() if isinstance(module, Linear)]
    assert len(linears) == 4 * config.num_hidden_layers  # qkv, o, gate/up, down
    assert all(module.linear_method is layers for module in linears)
    assert [id(module) for module in layers.processed] == [id(module) for module in linears]
    assert isinstance(model.lm_head, LMHead) and head.processed == [model.lm_head]
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied


def test_a_tied_head_multiplies_by_the_embedding_through_its_method(fake_kernels, tmp_path: Path) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path, tie_word_embeddings=True)
    methods = LinearMethods(UnquantizedLinearMethod(), CpuBf16WeightLinearMethod())
    model, config = load_model(model_dir, torch.float32, CPU, linear_methods=methods)
    embedding = model.model.embed_tokens.weight
    assert torch.equal(model.lm_head.weight_bf16, embedding.to(torch.bfloat16))
    hidden = torch.randn(2, config.hidden_size)
    torch.testing.assert_close(model.compute_logits(hidden), hidden @ embedding.to(torch.bfloat16).float().T)
    assert fake_kernels.calls == 1  # only the head has the CPU method


def test_the_head_keeps_no_weight_of_its_own_when_tied() -> None:
    tied = torch.nn.Parameter(torch.randn(10, 4), requires_grad=False)
    head = LMHead(4, 10, UnquantizedLinearMethod(), tied_weight=tied)
    assert head.weight is tied and [name for name, _ in head.named_parameters()] == ["weight"]
    x = torch.randn(3, 4)
    assert torch.equal(head(x), x @ tied.T)
    assert LMHead(4, 10, UnquantizedLinearMethod()).weight is not tied

