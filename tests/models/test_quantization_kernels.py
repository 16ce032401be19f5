"""Every int8/int4 kernel equals the dequantized-float reference, at odd row counts, on any CPU."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from autoglm.models.linear import Linear, MergedLinear
from autoglm.models.linear_method import process_weights_after_loading
from autoglm.models.linear_method.int_kernels import INT8_FUSED_MAX_ROWS, dequantized_linear
from autoglm.models.linear_method.int_weight_method import IntKernel, kernel_for
from autoglm.models.linear_method.int_weights import IntWeightFormat, quantize
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod

pytestmark = pytest.mark.cpu_isa

ROW_COUNTS = (1, 3, 8, 64, 300)
IN_FEATURES, OUT_FEATURES = 256, 96
# float32 activations: the kernels differ from the reference only in summation order over 256 products.
FLOAT32_TOLERANCE = 1e-5
# bfloat16 activations keep 8 bits: each product carries a relative error up to 2^-8, so outputs of
# unit scale differ by up to ~2^-8 * sqrt(256) in the worst case; 2e-2 relative to the output's size holds it.
BFLOAT16_TOLERANCE = 2e-2
FORMATS = {"int8-channel": IntWeightFormat(8), "int8-group32": IntWeightFormat(8, 32),
           "int4-group32": IntWeightFormat(4, 32), "int4-group128": IntWeightFormat(4, 128),
           "int4-group16": IntWeightFormat(4, 16)}


def quantized_layer(weight_format: IntWeightFormat, fused_dtype: torch.dtype | None = None,
                    bias: bool = True) -> tuple[Linear, torch.Tensor, torch.Tensor]:
    """A loaded, quantized layer, and the ``q``/``scale`` of its weights for the reference."""
    torch.manual_seed(0)
    layer = Linear(IN_FEATURES, OUT_FEATURES, bias, QuantizeAtLoadLinearMethod(weight_format, fused_dtype))
    weight = torch.randn(OUT_FEATURES, IN_FEATURES) * 0.1
    layer.weight.weight_loader(layer.weight, weight)
    if bias:
        layer.bias.weight_loader(layer.bias, torch.randn(OUT_FEATURES))
    layer.linear_method.process_weights_after_loading(layer)
    q, scale = quantize(weight, weight_format, weight_format.group_size_for(IN_FEATURES))
    return layer, q, scale


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.float() - expected.float()).abs().max() / expected.float().abs().max())


@pytest.mark.parametrize("rows", ROW_COUNTS)
@pytest.mark.parametrize("name", FORMATS)
def test_float32_activations_match_the_dequantized_reference(name: str, rows: int) -> None:
    layer, q, scale = quantized_layer(FORMATS[name])
    x = torch.randn(rows, IN_FEATURES)
    expected = dequantized_linear(x, q, scale, layer.bias)
    assert layer(x).dtype == torch.float32
    assert relative_error(layer(x), expected) < FLOAT32_TOLERANCE


@pytest.mark.parametrize("rows", ROW_COUNTS)
@pytest.mark.parametrize("name", ["int8-channel", "int4-group32"])
def test_bfloat16_fused_activations_match_within_their_rounding(name: str, rows: int) -> None:
    layer, q, scale = quantized_layer(FORMATS[name], fused_dtype=torch.bfloat16)
    x = torch.randn(rows, IN_FEATURES)
    y = layer(x)
    assert y.dtype == torch.float32
    assert relative_error(y, dequantized_linear(x, q, scale, layer.bias)) < BFLOAT16_TOLERANCE


def test_leading_dimensions_are_kept() -> None:
    layer, q, scale = quantized_layer(FORMATS["int4-group32"], bias=False)
    x = torch.randn(2, 5, IN_FEATURES)
    assert layer(x).shape == (2, 5, OUT_FEATURES)
    assert relative_error(layer(x), dequantized_linear(x, q, scale)) < FLOAT32_TOLERANCE


def test_the_float_weight_is_dropped_and_the_integer_weight_is_what_remains() -> None:
    layer, _, _ = quantized_layer(FORMATS["int4-group32"])
    assert not hasattr(layer, "weight")
    assert layer.qweight.element_size() * layer.qweight.numel() <= OUT_FEATURES * IN_FEATURES // 2 + 64
    int8_layer, q, _ = quantized_layer(FORMATS["int8-channel"])
    assert torch.equal(int8_layer.qweight, q) and int8_layer.int_kernel is IntKernel.INT8_FUSED


def test_fused_projections_quantize_each_part_like_a_layer_of_its_own() -> None:
    weight_format = IntWeightFormat(4, 32)
    merged = MergedLinear(IN_FEATURES, {"q_proj": 64, "k_proj": 32}, False, QuantizeAtLoadLinearMethod(weight_format))
    parts = [torch.randn(64, IN_FEATURES), torch.randn(32, IN_FEATURES)]
    for shard_id, part in enumerate(parts):
        merged.weight.weight_loader(merged.weight, part, shard_id)
    merged.linear_method.process_weights_after_loading(merged)
    x = torch.randn(3, IN_FEATURES)
    expected = torch.cat([dequantized_linear(x, *quantize(part, weight_format, 32)) for part in parts], dim=-1)
    assert relative_error(merged(x), expected) < FLOAT32_TOLERANCE


def test_kernel_choice_per_device_and_format() -> None:
    cpu, other = torch.device("cpu"), torch.device("meta")
    assert kernel_for(IntWeightFormat(8), cpu, 256, 256) is IntKernel.INT8_FUSED
    assert kernel_for(IntWeightFormat(8, 32), cpu, 32, 256) is IntKernel.DEQUANTIZE
    assert kernel_for(IntWeightFormat(4, 128), cpu, 128, 256) is IntKernel.INT4_FUSED
    assert kernel_for(IntWeightFormat(4, 16), cpu, 16, 256) is IntKernel.DEQUANTIZE
    assert kernel_for(IntWeightFormat(8), other, 256, 256) is IntKernel.DEQUANTIZE


def test_int8_steps_above_the_fused_limit_dequantize(monkeypatch: pytest.MonkeyPatch) -> None:
    layer, _, _ = quantized_layer(FORMATS["int8-channel"])
    calls = []
    monkeypatch.setattr(torch, "_weight_int8pack_mm", lambda *args: calls.append(args) or torch.zeros(1))
    layer(torch.randn(INT8_FUSED_MAX_ROWS + 1, IN_FEATURES))
    assert calls == []


def test_a_group_size_that_does_not_divide_is_refused_naming_the_layer() -> None:
    model = nn.Sequential()
    model.add_module("proj", Linear(IN_FEATURES, 8, False, QuantizeAtLoadLinearMethod(IntWeightFormat(4, 96))))
    model.proj.weight.weight_loader(model.proj.weight, torch.randn(8, IN_FEATURES))
    with pytest.raises(ValueError, match=r"layer 'proj': quantization group size 96 does not divide the input "
                                         r"size 256; group sizes that do: 16, 32, 64, 128"):
        process_weights_after_loading(model)


@pytest.mark.parametrize(("name", "rows", "path"), [
    ("int8-channel", 1, "int8-fused"), ("int8-channel", INT8_FUSED_MAX_ROWS, "int8-fused"),
    ("int8-channel", INT8_FUSED_MAX_ROWS + 1, "dequantize"), ("int4-group32", 300, "int4-fused"),
    ("int8-group32", 1, "dequantize"),
])
def test_the_method_names_the_path_each_step_takes_for_the_profile(name: str, rows: int, path: str) -> None:
    layer, _, _ = quantized_layer(FORMATS[name])
    assert layer.linear_method.path(layer, torch.randn(rows, IN_FEATURES)) == path
