"""int8/int4 quantize-dequantize round trips, group sizes, and the settings that ask for them."""
from __future__ import annotations

import pytest
import torch

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.models.linear_method import WeightQuantization
from autoglm.models.linear_method.int_weights import (
    GroupSizeError,
    IntWeightFormat,
    dequantize,
    dividing_group_sizes,
    quantize,
)

FORMATS = [IntWeightFormat(8), IntWeightFormat(8, 32), IntWeightFormat(4, 32), IntWeightFormat(4, 128)]


@pytest.mark.parametrize("weight_format", FORMATS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_round_trip_is_within_half_a_scale_step(weight_format: IntWeightFormat, dtype: torch.dtype) -> None:
    weight = (torch.randn(48, 256, generator=torch.Generator().manual_seed(0)) * 0.2).to(dtype)
    group_size = weight_format.group_size_for(256)
    q, scale = quantize(weight, weight_format, group_size)
    low, high = weight_format.levels
    assert q.dtype == torch.int8 and q.shape == weight.shape and scale.dtype == dtype
    assert scale.shape == (48, 256 // group_size) and int(q.min()) >= low and int(q.max()) <= high
    error = (dequantize(q, scale, torch.float32) - weight.float()).abs()
    step = scale.float().repeat_interleave(group_size, dim=1)
    # Half a step from rounding, plus the rounding of a 16-bit scale (a bfloat16 scale carries 8 bits).
    slack = 1.01 if dtype == torch.float32 else 1.0 + 2 ** -7 * high
    assert bool((error <= step * 0.5 * slack).all())


def test_zero_groups_stay_exactly_zero_and_the_largest_magnitude_maps_to_half_the_range() -> None:
    weight = torch.zeros(2, 64)
    weight[1, :32] = torch.linspace(-1.0, 0.5, 32)
    q, scale = quantize(weight, IntWeightFormat(4, 32), 32)
    assert torch.equal(dequantize(q, scale, torch.float32)[0], torch.zeros(64))
    assert scale[1, 0].item() == pytest.approx(1.0 / 7.5)  # (2^4 - 1) / 2, as compressed-tensors computes it


def test_a_group_size_that_does_not_divide_is_refused_naming_the_sizes_that_would() -> None:
    with pytest.raises(GroupSizeError, match=r"group size 48 does not divide the input size 896; "
                                             r"group sizes that do: 16, 32, 64, 128"):
        IntWeightFormat(4, 48).group_size_for(896)
    assert IntWeightFormat(8).group_size_for(896) == 896
    assert dividing_group_sizes(12) == [1, 2, 3, 4, 6, 12]


def test_unsupported_bits_and_group_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="3-bit weights are not supported; choose one of"):
        IntWeightFormat(3)
    with pytest.raises(ValueError, match="group size must be a positive integer"):
        IntWeightFormat(8, 0)


def test_settings_choose_the_format() -> None:
    assert WeightQuantization.from_settings("none") is None
    assert WeightQuantization.from_settings("int8") == WeightQuantization(IntWeightFormat(8, None))
    assert WeightQuantization.from_settings("int4", quantize_lm_head=True) == WeightQuantization(
        IntWeightFormat(4, 128), quantize_lm_head=True)
    with pytest.raises(ValueError, match="unknown quantization method 'int3'; choose one of: none, int8, int4"):
        WeightQuantization.from_settings("int3")


def test_an_unknown_quantization_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="quantization"):
        AutoGLMConfig(quantization="fp4")
    with pytest.raises(ConfigError, match="quantization_group_size"):
        AutoGLMConfig(quantization_group_size=0)
