"""Linear methods: what each creates, computes and post-processes, how one is chosen per model,
and that the LM head's method is its own, tied to the embedding or not."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from autoglm.models import load_model
from autoglm.models.linear import Linear, LMHead, MergedLinear
from autoglm.kernels import linear_kernels
from autoglm.kernels.linear_kernels import BF16_DOT_AVX512, BF16_WEIGHT_AVX2, BF16_WEIGHT_AVX512
from autoglm.models.linear_method import (
    CpuKernelLinearMethod,
    EveryRow,
    FixedRowLimit,
    LinearMethods,
    MeasuredRowLimit,
    UnquantizedLinearMethod,
    linear_methods_for,
)
from autoglm.models.parameters import StackedRowsWeightLoader
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.cpu_isa

CPU = torch.device("cpu")


class RecordingMethod(UnquantizedLinearMethod):
    """Unquantized, noting each layer it post-processes."""

    def __init__(self) -> None:
        self.processed: list[torch.nn.Module] = []

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self.processed.append(layer)


MAX_ROWS = 8
KERNEL = BF16_WEIGHT_AVX512


class FakeKernels:
    """Stands in for the compiled kernels: the same result, and a count of the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def linear_bf16_weight_avx512(self, x: torch.Tensor, weight_bf16: torch.Tensor) -> torch.Tensor:
        assert weight_bf16.dtype == torch.bfloat16
        self.calls += 1
        return F.linear(x, weight_bf16.float())


@pytest.fixture
def fake_kernels(monkeypatch) -> FakeKernels:
    kernels = FakeKernels()
    monkeypatch.setattr(linear_kernels, "cpu_kernels", lambda: kernels)
    return kernels


@pytest.fixture
def all_cpu_flags(monkeypatch) -> None:
    """A CPU with every flag a kernel asks for, whatever this one has."""
    monkeypatch.setattr(linear_kernels, "cpu_has_flags", lambda flag: True)


@pytest.fixture
def no_kernels(monkeypatch) -> None:
    monkeypatch.setattr(linear_kernels, "cpu_kernels", lambda: None)


def cpu_method(rows: int = MAX_ROWS) -> CpuKernelLinearMethod:
    return CpuKernelLinearMethod(KERNEL, FixedRowLimit(rows))


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
    method = cpu_method()
    layer = loaded_linear(method)
    assert layer.kernel_weight.dtype == torch.bfloat16 and torch.equal(layer.kernel_weight.float(), layer.weight)
    assert loaded_linear(method, in_features=24).kernel_weight is None  # not a multiple of 16


def test_a_bfloat16_kernel_reads_a_bfloat16_weight_in_place() -> None:
    method = CpuKernelLinearMethod(BF16_DOT_AVX512, FixedRowLimit(MAX_ROWS))
    layer = Linear(64, 16, False, method).to(torch.bfloat16)
    method.process_weights_after_loading(layer)
    assert layer.kernel_weight.data_ptr() == layer.weight.data_ptr()  # no copy


def test_cpu_method_runs_steps_up_to_its_row_limit_through_the_kernel(fake_kernels) -> None:
    layer = loaded_linear(cpu_method())
    layer.weight.zero_()  # a float32 weight unlike the copy reveals which path ran
    small = torch.randn(MAX_ROWS, 32)
    assert torch.equal(layer(small), F.linear(small, layer.kernel_weight.float()) + layer.bias)
    assert fake_kernels.calls == 1
    for other in (torch.randn(MAX_ROWS + 1, 32), torch.randn(1, 1, 32)):  # many rows; not 2-D
        assert torch.equal(layer(other), F.linear(other, layer.weight, layer.bias))
    assert fake_kernels.calls == 1


def test_a_zero_row_limit_keeps_every_step_on_pytorch(fake_kernels) -> None:
    layer = loaded_linear(cpu_method(rows=0))
    x = torch.randn(1, 32)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias)) and fake_kernels.calls == 0


def test_cpu_method_without_the_kernels_is_the_float32_matmul(no_kernels) -> None:
    method = cpu_method()
    layer = loaded_linear(method)
    layer.weight.zero_()
    x = torch.randn(1, 32)
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    assert method.decode_weight_dtype(torch.float32) == torch.float32


def test_measured_row_limits_wait_for_the_kernels(no_kernels, tmp_path: Path) -> None:
    layer = loaded_linear(CpuKernelLinearMethod(KERNEL, MeasuredRowLimit(tmp_path / "limits.json")))
    assert layer.linear_method.path(layer, torch.randn(1, 32)) == "torch"
    assert not (tmp_path / "limits.json").exists()  # nothing measured, nothing kept


def test_cpu_method_reads_bfloat16_once_the_kernels_load(fake_kernels) -> None:
    assert cpu_method().decode_weight_dtype(torch.float32) == torch.bfloat16
    assert UnquantizedLinearMethod().decode_weight_dtype(torch.float32) == torch.float32


@pytest.mark.parametrize(
    ("device", "dtype", "requested", "coming", "expected"),
    [
        ("cpu", torch.float32, torch.bfloat16, True, BF16_WEIGHT_AVX512),  # upcast on a CPU without bf16 units
        ("cpu", torch.bfloat16, torch.bfloat16, True, BF16_DOT_AVX512),  # computed natively
        ("cpu", torch.float32, torch.bfloat16, False, None),  # no kernel library coming
        ("cpu", torch.float32, torch.float16, True, None),  # the kernels read bfloat16 only
        ("cpu", torch.float32, torch.float32, True, None),  # a bfloat16 copy would change the results
        ("meta", torch.float32, torch.bfloat16, True, None),  # not a CPU
    ],
)
def test_a_cpu_kernel_is_chosen_only_for_a_bfloat16_checkpoint_on_the_cpu(all_cpu_flags, device, dtype, requested,
                                                                          coming, expected) -> None:
    methods = linear_methods_for(torch.device(device), dtype, requested, kernels_coming=coming)
    if expected is None:
        assert type(methods.layers) is UnquantizedLinearMethod and type(methods.lm_head) is UnquantizedLinearMethod
    else:
        assert methods.layers is methods.lm_head and methods.layers.kernel is expected
        assert isinstance(methods.layers.row_limit, EveryRow)


def test_auto_takes_the_fastest_kernel_the_cpu_runs(monkeypatch) -> None:
    monkeypatch.setattr(linear_kernels, "cpu_has_flags", lambda flag: flag in ("avx2", "fma"))
    methods = linear_methods_for(CPU, torch.float32, torch.bfloat16, kernels_coming=True)
    assert methods.layers.kernel is BF16_WEIGHT_AVX2
    assert type(linear_methods_for(CPU, torch.bfloat16, torch.bfloat16, kernels_coming=True).layers) \
        is UnquantizedLinearMethod  # no bfloat16 kernel runs there: PyTorch's matmul


def test_a_pinned_kernel_and_row_limit_are_kept(all_cpu_flags) -> None:
    methods = linear_methods_for(CPU, torch.float32, torch.bfloat16, "bf16-weight-avx2", FixedRowLimit(3),
                                 kernels_coming=True)
    assert methods.layers.kernel is BF16_WEIGHT_AVX2 and methods.layers.row_limit.rows == 3
    assert type(linear_methods_for(CPU, torch.float32, torch.bfloat16, "torch", kernels_coming=True).layers) \
        is UnquantizedLinearMethod


@pytest.mark.parametrize(
    ("name", "dtype", "message"),
    [
        ("fastest", torch.float32, r"'fastest' is not a kernel; choose one of auto, torch, bf16-dot-avx512, "),
        ("bf16-dot-avx512", torch.float32, r"takes bfloat16 activations, but this model computes with float32 here; "
                                           r"kernels for it: auto, torch, bf16-weight-avx512, bf16-weight-avx2"),
        ("bf16-weight-avx512", torch.float32, r"needs the CPU flags avx512f, avx512bw, which this CPU lacks .*"
                                              r"kernels this CPU runs for this model: auto, torch, bf16-weight-avx2$"),
    ],
)
def test_a_kernel_that_cannot_serve_the_model_is_refused_with_the_choices(monkeypatch, name, dtype, message) -> None:
    monkeypatch.setattr(linear_kernels, "cpu_has_flags", lambda flag: flag in ("avx2", "fma"))
    with pytest.raises(ValueError, match=message):
        linear_methods_for(CPU, dtype, torch.bfloat16, name, kernels_coming=True)


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
    methods = LinearMethods(UnquantizedLinearMethod(), cpu_method())
    model, config = load_model(model_dir, torch.float32, CPU, linear_methods=methods)
    embedding = model.model.embed_tokens.weight
    assert torch.equal(model.lm_head.kernel_weight, embedding.to(torch.bfloat16))
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

