"""The fused elementwise kernels against the model's PyTorch code they replace, and the model through them.

float32 results equal PyTorch's but where the order of RMSNorm's sum differs: there within 1e-6. bfloat16 ones round where PyTorch rounds: equal, or one bfloat16 step apart
where a float32 difference that small lands on a rounding boundary (and that step, in a value
rounded again after a multiply, can be two steps of the result).
"""
from __future__ import annotations

import pytest
import torch

from autoglm.kernels.cpu_extension import REQUIRED_CPU_FLAGS
from autoglm.models import fused_ops
from autoglm.models.layers import RMSNorm
from autoglm.models.rotary import RotaryAngles
from autoglm.platforms import cpu_has_flags
from tests.models.logit_parity import max_logprob_difference
from tests.models.test_model_parity import FAMILY_CASES, TOLERANCE
from tests.tiny_models import make_tiny_checkpoint

pytestmark = [pytest.mark.cpu_isa,
              pytest.mark.skipif(not cpu_has_flags(*REQUIRED_CPU_FLAGS),
                                 reason=f"the kernel library needs {', '.join(REQUIRED_CPU_FLAGS)}")]

DTYPES = [torch.float32, torch.bfloat16]
ROWS = [1, 3, 17, 80]  # 80 rows of 1031 values are enough to split over threads
WIDTHS = [1, 7, 64, 1031]


@pytest.fixture
def kernels(cpu_kernels):
    return cpu_kernels


@pytest.fixture
def torch_path(monkeypatch):
    """The model's PyTorch code, whatever has loaded."""
    monkeypatch.setattr(fused_ops, "cpu_kernels", lambda: None)


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    if actual.dtype == torch.float32:
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-6)
    else:  # nearly all equal; the rest one step apart in the intermediate rounded to bfloat16
        torch.testing.assert_close(actual.float(), expected.float(), rtol=2 ** -6, atol=1e-6)
        assert (actual == expected).float().mean() > 0.99


def torch_norm(width: int, weight: torch.Tensor) -> RMSNorm:
    norm = RMSNorm(width, eps=1e-6)
    norm.weight.data = weight
    return norm


def with_torch_path(monkeypatch, function, *args):
    with monkeypatch.context() as patch:
        patch.setattr(fused_ops, "cpu_kernels", lambda: None)
        return function(*args)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("width", WIDTHS)
def test_rms_norm_matches_the_torch_norm(kernels, monkeypatch, dtype, rows, width):
    x, weight = (torch.randn(rows, width) * 3).to(dtype), torch.randn(width).to(dtype)
    norm = torch_norm(width, weight)
    assert_close(kernels.rms_norm(x, weight, norm.eps), with_torch_path(monkeypatch, norm, x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("width", WIDTHS)
def test_add_rms_norm_adds_in_place_and_norms_over_x(kernels, monkeypatch, dtype, rows, width):
    x, residual, weight = torch.randn(rows, width).to(dtype), torch.randn(rows, width).to(dtype), \
        torch.randn(width).to(dtype)
    norm = torch_norm(width, weight)
    expected_normed, expected_residual = with_torch_path(monkeypatch, norm.add_and_norm, x, residual)
    kernels.fused_add_rms_norm(x, residual, weight, norm.eps)
    assert torch.equal(residual, expected_residual)  # one addition, rounded as PyTorch rounds it
    assert_close(x, expected_normed)


def angles_for(tokens: int, rotary_dim: int, interleaved: bool, dtype: torch.dtype) -> RotaryAngles:
    freqs = torch.randn(tokens, rotary_dim // 2) * 10
    angles = freqs.repeat_interleave(2, dim=-1) if interleaved else torch.cat((freqs, freqs), dim=-1)
    return RotaryAngles(cos=angles.cos().to(dtype)[:, None], sin=angles.sin().to(dtype)[:, None],
                        interleaved=interleaved)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved, head_dim, rotary_dim", [(False, 64, 64), (False, 6, 6), (True, 64, 64),
                                                               (True, 64, 32), (True, 10, 4)])
@pytest.mark.parametrize("tokens", [1, 5, 300])
def test_rotary_rotates_strided_q_and_k_in_place_as_the_torch_code(kernels, monkeypatch, dtype, interleaved,
                                                                   head_dim, rotary_dim, tokens):
    heads, kv_heads = 3, 2
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * head_dim).to(dtype)
    q, k, v = qkv.split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q, k = q.view(tokens, heads, head_dim), k.view(tokens, kv_heads, head_dim)
    angles = angles_for(tokens, rotary_dim, interleaved, dtype)
    expected_q, expected_k = with_torch_path(monkeypatch, angles.rotate_query_key, q, k)
    v_before = v.clone()
    rotated_q, rotated_k = angles.rotate_query_key(q, k)
    assert rotated_q.data_ptr() == q.data_ptr() and rotated_k.data_ptr() == k.data_ptr()
    assert torch.equal(rotated_q, expected_q) and torch.equal(rotated_k, expected_k)  # same roundings, same order
    assert torch.equal(v, v_before)


def test_the_torch_code_runs_where_the_kernels_do_not_apply(kernels):
    norm = torch_norm(8, torch.randn(8, dtype=torch.float16))
    x = torch.randn(2, 8, dtype=torch.float16)
    assert fused_ops.fused_kernels(x, norm.weight) is None
    assert fused_ops.fused_kernels(x.float(), norm.weight) is None  # dtypes differ
    assert fused_ops.fused_kernels(x.float(), norm.weight.float()) is kernels
    normed, residual = norm.add_and_norm(x, x.clone())
    assert normed.dtype == torch.float16 and torch.equal(residual, x + x)


def test_the_torch_path_is_taken_until_the_library_loads(torch_path):
    assert fused_ops.fused_kernels(torch.randn(2)) is None


@pytest.mark.parametrize("case", FAMILY_CASES)
def test_family_matches_transformers_through_the_fused_kernels(kernels, case, tmp_path):
    family, overrides = FAMILY_CASES[case]
    model_dir = make_tiny_checkpoint(family, tmp_path, **overrides)
    assert fused_ops.fused_kernels(torch.randn(1)) is kernels
    assert max_logprob_difference(model_dir) < TOLERANCE


@pytest.mark.skipif(not cpu_has_flags("avx512f", "avx512bw"), reason="silu_and_mul needs avx512f and avx512bw")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("inner", [1, 17, 1031])
def test_silu_and_mul_rounds_as_silu_gate_times_up(kernels, dtype, rows, inner):
    gate_up = (torch.randn(rows, 2 * inner, generator=torch.Generator().manual_seed(rows * inner)) * 4).to(dtype)
    gate, up = gate_up.chunk(2, dim=-1)
    assert_close(kernels.silu_and_mul(gate_up), torch.nn.functional.silu(gate) * up)


@pytest.mark.skipif(not cpu_has_flags("avx512f", "avx512bw"), reason="silu_and_mul needs avx512f and avx512bw")
def test_silu_and_mul_at_the_edges_of_exp(kernels):
    gate = torch.tensor([-200.0, -88.0, -20.0, -0.0, 0.0, 1e-30, 20.0, 88.0, 89.0, 200.0, float("inf")])
    gate_up = torch.cat([gate, torch.ones_like(gate)]).unsqueeze(0)
    torch.testing.assert_close(kernels.silu_and_mul(gate_up)[0], torch.nn.functional.silu(gate), rtol=1e-6, atol=0)
