"""Each kv_cache_dtype's round trip stays within its format's bound, and a device that cannot convert is refused."""
from __future__ import annotations

import pytest
import torch

from autoglm.attention import kv_cache_format as formats
from autoglm.attention.kv_cache_format import (AUTO, FP8_E4M3, FP8_E5M2, INT8, check_kv_cache_format,
                                               kv_cache_format)
from autoglm.attention.layer_kv_cache import LayerKVCache

CPU = torch.device("cpu")
# Half a unit in the last place, relative to the value, for normal numbers (3 and 2 stored mantissa
# bits), and half the smallest subnormal, absolute, below the normal range.
FP8_BOUNDS = {FP8_E4M3: (2.0**-4, 2.0**-10), FP8_E5M2: (2.0**-3, 2.0**-17)}


def sample(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[tokens, kv_heads, head_dim], heads of very different magnitudes, one all-zero head."""
    torch.manual_seed(0)
    x = torch.randn(37, 3, 64) * torch.tensor([1e-3, 1.0, 40.0]).view(1, 3, 1)
    x[5, 1] = 0
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_int8_round_trip_is_within_half_a_step_of_each_token_and_head(dtype):
    x = sample(dtype)
    stored, scales = INT8.quantize(x)
    assert stored.dtype == torch.int8 and scales.dtype == torch.float32 and scales.shape == x.shape[:2]
    assert stored.abs().max() <= 127
    back = INT8.dequantize(stored, scales, torch.float32)
    # Half an int8 step (the head's largest magnitude / 254), plus the rounding of the result to ``dtype``.
    step = x.float().abs().amax(dim=-1, keepdim=True) / 127
    bound = step / 2 + x.float().abs() * torch.finfo(dtype).eps
    assert ((back - x.float()).abs() <= bound * (1 + 1e-6)).all()
    assert torch.equal(back[5, 1], torch.zeros(64)), "an all-zero head comes back as zeros"


@pytest.mark.parametrize("kv_format", [FP8_E4M3, FP8_E5M2], ids=lambda f: f.name)
def test_fp8_round_trip_is_within_half_a_unit_in_the_last_place(kv_format):
    relative, absolute = FP8_BOUNDS[kv_format]
    x = sample()
    stored, scales = kv_format.quantize(x)
    assert scales is None and stored.dtype == kv_format.storage_dtype
    error = (kv_format.dequantize(stored, None, torch.float32) - x).abs()
    assert (error <= torch.maximum(x.abs() * relative, torch.tensor(absolute))).all()


@pytest.mark.parametrize("kv_format", [FP8_E4M3, FP8_E5M2], ids=lambda f: f.name)
def test_fp8_saturates_at_the_largest_finite_value_instead_of_overflowing(kv_format):
    largest = torch.finfo(kv_format.storage_dtype).max
    stored, _ = kv_format.quantize(torch.tensor([1e9, -1e9]))
    assert kv_format.dequantize(stored, None, torch.float32).tolist() == [largest, -largest]


def test_auto_stores_as_computed():
    x = sample(torch.bfloat16)
    stored, scales = AUTO.quantize(x)
    assert stored is x and scales is None
    assert AUTO.bytes_per_token_head(64, torch.bfloat16) == 128


def test_an_int8_token_head_costs_its_bytes_and_a_float32_scale():
    assert INT8.bytes_per_token_head(64, torch.bfloat16) == 64 + 4
    assert FP8_E4M3.bytes_per_token_head(64, torch.float32) == 64


@pytest.mark.parametrize("kv_format", [INT8, FP8_E4M3, FP8_E5M2], ids=lambda f: f.name)
def test_a_layer_cache_writes_to_slots_and_gathers_them_back(kv_format):
    slots = 12
    cache = LayerKVCache(torch.zeros(slots, 3, 64, dtype=kv_format.storage_dtype),
                         torch.zeros(slots, 3, 64, dtype=kv_format.storage_dtype), kv_format,
                         *((torch.zeros(slots, 3), torch.zeros(slots, 3)) if kv_format.scaled else ()))
    k, v = sample()[:4], -sample()[:4]
    where = torch.tensor([7, 2, 11, 0])
    written_k, written_v = cache.write(where, k, v)
    keys, values = cache.gather(where.view(2, 2), torch.float32)
    assert keys.shape == (2, 2, 3, 64)
    expected_k, expected_v = (kv_format.dequantize(*kv_format.quantize(x), torch.float32) for x in (k, v))
    assert torch.equal(keys.flatten(0, 1), expected_k) and torch.equal(values.flatten(0, 1), expected_v)
    assert torch.equal(written_k, expected_k) and torch.equal(written_v, expected_v), "write returns what reads give"


def test_an_unknown_kv_cache_dtype_names_the_allowed_ones():
    with pytest.raises(ValueError, match="unknown kv_cache_dtype 'int4'; allowed: auto, int8, fp8_e4m3, fp8_e5m2"):
        kv_cache_format("int4")


def test_float8_on_a_device_without_float8_conversions_is_refused(monkeypatch):
    monkeypatch.setattr(formats, "converts_on", lambda device, dtype: dtype not in (torch.float8_e4m3fn,
                                                                                    torch.float8_e5m2))
    with pytest.raises(ValueError, match="kv_cache_dtype 'fp8_e5m2' needs float8_e5m2 conversions, which PyTorch "
                                         "does not offer on cpu; allowed here: auto, int8"):
        check_kv_cache_format(FP8_E5M2, CPU)
    check_kv_cache_format(INT8, CPU)


def test_this_pytorch_converts_float8_on_the_cpu():
    """What the fp8 tests above rely on; a PyTorch without it gets the refusal instead."""
    assert formats.converts_on(CPU, torch.float8_e4m3fn) and formats.converts_on(CPU, torch.float8_e5m2)
