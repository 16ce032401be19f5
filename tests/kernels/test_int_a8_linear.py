"""The W8A8/W4A8 kernel against a float64 product of the same quantized activations and weights: odd
shapes, 1 to 40 rows, every column range, each row bit for bit what it is alone. Skipped, naming the
missing flags, on a CPU without AVX512-VNNI."""
from __future__ import annotations

import pytest
import torch

from autoglm.kernels.int_a8_kernel import int_a8_missing_flags
from autoglm.models.linear_method.int_activation_weights import (
    pack_int_a8,
    quantize_activations,
    unpack_int_a8,
)
from autoglm.models.linear_method.int_weights import IntWeightFormat, dequantize, quantize

pytestmark = pytest.mark.cpu_isa

OUT_FEATURES = 37  # not a multiple of the kernel's 4-column tiles
# (bits, group size, in_features): per channel, groups of 32 (two per 64-column step), wider groups, and
# for int4 a last 64 columns outside the 128-column blocks.
FORMATS = [(8, None, 64), (8, None, 320), (8, 32, 192), (8, 128, 256), (4, 32, 64), (4, 32, 320), (4, 64, 192),
           (4, 128, 384)]
# float32 sums of exact int32 group sums: the float64 reference differs only in the summation's rounding.
RELATIVE_TOLERANCE = 1e-5


@pytest.fixture
def library(cpu_kernels):
    missing = int_a8_missing_flags()
    if missing:
        pytest.skip(f"the int8-activation kernel needs CPU flags this CPU lacks (or hides): {', '.join(missing)}")
    return cpu_kernels


def packed_weights(bits: int, group_size: int | None, in_features: int, seed: int = 0):
    """``(packed, scales, q, scale, group)``: the kernel's layout and the values it stands for."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(OUT_FEATURES, in_features, generator=generator)
    weight_format = IntWeightFormat(bits, group_size)
    group = weight_format.group_size_for(in_features)
    q, scale = quantize(weight, weight_format, group)
    packed, scales = pack_int_a8(q, scale, bits)
    return packed, scales, q, scales.float(), group


def reference(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """float64: the activations quantized as the kernel does, times the dequantized weight."""
    x_q, x_scale = quantize_activations(x)
    y = (x_q.double() * x_scale.double()) @ dequantize(q, scale, torch.float64).T
    return y if bias is None else y + bias.double()


def assert_close_to(y: torch.Tensor, expected: torch.Tensor, out_dtype: torch.dtype) -> None:
    bound = RELATIVE_TOLERANCE * float(expected.abs().max()) + 1e-6
    if out_dtype == torch.bfloat16:  # one rounding to 8 significant bits on top
        bound += float(expected.abs().max()) * 2**-8
    assert float((y.double() - expected).abs().max()) <= bound


@pytest.mark.parametrize(("bits", "group_size", "in_features"), FORMATS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["no-bias", "bias"])
def test_kernel_equals_the_float64_product_of_its_quantized_inputs(library, bits, group_size, in_features, dtype,
                                                                   with_bias):
    packed, scales, q, scale, group = packed_weights(bits, group_size, in_features)
    bias = torch.randn(OUT_FEATURES) if with_bias else None
    for rows in range(1, 41):
        x = torch.randn(rows, in_features).to(dtype)
        y = library.linear_int_a8(x, packed, scales, bias, bits, group)
        assert y.dtype == dtype and y.shape == (rows, OUT_FEATURES)
        assert_close_to(y, reference(x, q, scale, bias), dtype)


@pytest.mark.parametrize(("bits", "group_size", "in_features"), [(8, None, 320), (4, 32, 320)])
def test_every_column_range_computes_what_the_whole_product_does(library, bits, group_size, in_features):
    packed, scales, _, _, group = packed_weights(bits, group_size, in_features)
    x, bias = torch.randn(5, in_features).bfloat16(), torch.randn(OUT_FEATURES)
    whole = library.linear_int_a8(x, packed, scales, bias, bits, group)
    for begin in range(OUT_FEATURES + 1):
        for end in range(begin, OUT_FEATURES + 1):
            part = library.linear_int_a8(x, packed, scales, bias, bits, group, begin, end)
            assert torch.equal(part[:, begin:end], whole[:, begin:end]), (begin, end)
            assert not part[:, :begin].any() and not part[:, end:].any()


@pytest.mark.parametrize(("bits", "group_size", "in_features"), FORMATS)
def test_each_row_is_computed_as_it_would_be_alone(library, bits, group_size, in_features):
    """Bitwise: a batch's rows get what a step of that row alone gets (batch invariance)."""
    packed, scales, _, _, group = packed_weights(bits, group_size, in_features)
    x = torch.randn(40, in_features).bfloat16()
    together = library.linear_int_a8(x, packed, scales, None, bits, group)
    for row in range(40):
        assert torch.equal(together[row], library.linear_int_a8(x[row : row + 1], packed, scales, None, bits, group)[0])


def test_all_zero_rows_give_the_bias(library):
    packed, scales, _, _, group = packed_weights(4, 32, 64)
    bias = torch.randn(OUT_FEATURES)
    assert torch.equal(library.linear_int_a8(torch.zeros(3, 64), packed, scales, bias, 4, group), bias.expand(3, -1))


@pytest.mark.parametrize(("bits", "group_size", "in_features"), FORMATS)
def test_the_layout_keeps_every_weight(bits, group_size, in_features):
    packed, _, q, _, _ = packed_weights(bits, group_size, in_features)
    assert packed.dtype == torch.uint8 and packed.shape == (40, in_features * bits // 8)
    assert torch.equal(unpack_int_a8(packed, bits, OUT_FEATURES), q)


def test_the_kernel_refuses_what_it_cannot_compute(library):
    packed, scales, _, _, _ = packed_weights(8, None, 64)
    with pytest.raises(RuntimeError, match="multiple of 64"):
        library.linear_int_a8(torch.randn(1, 96), packed, scales, None, 8, 96)
    with pytest.raises(RuntimeError, match="group must be 32 or a multiple of 64"):
        library.linear_int_a8(torch.randn(1, 64), packed, scales, None, 8, 16)
    with pytest.raises(RuntimeError, match="scales must be"):
        library.linear_int_a8(torch.randn(1, 64), packed, scales.float(), None, 8, 64)
    with pytest.raises(RuntimeError, match="packed must be"):
        library.linear_int_a8(torch.randn(1, 64), packed[:36], scales, None, 8, 64)
