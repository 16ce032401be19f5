"""``autoglm bench roofline``: this machine's read and copy bandwidth and matmul speed, and on a CPU
every linear path's (see :mod:`autoglm.bench.results.roofline` for the bounds they give)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.bench.lib.timing import best_seconds_per_call
from autoglm.bench.results.report import dtype_name
from autoglm.bench.results.roofline import MatmulRate, Roofline, count_weights
from autoglm.bench.roofline.linear_paths import measure_linear_paths
from autoglm.platforms import compute_dtype

BENCH_DTYPES = ("float32", "bfloat16")  # matmuls always measured; the engine's dtype is added if another


@dataclass(frozen=True)
class MeasureSizes:
    """How big and how often to measure; bandwidth tensors must dwarf the last-level cache."""

    bandwidth_bytes: int
    matmul_rows: tuple[int, ...]  # M: batch-1 decode, a decode batch, a prefill chunk
    matmul_widths: tuple[int, ...]  # K = N: hidden sizes of small and mid-size models
    repeats: int
    min_round_s: float


FULL_SIZES = MeasureSizes(512 * 2**20, (1, 64, 512), (1024, 4096), repeats=5, min_round_s=0.2)
QUICK_SIZES = MeasureSizes(4 * 2**20, (1, 16), (128,), repeats=3, min_round_s=0.01)


def read_bandwidth(device: torch.device, sizes: MeasureSizes) -> float:
    """Bytes/s of summing a tensor: every byte read once, almost no arithmetic per byte."""
    data = torch.ones(sizes.bandwidth_bytes // 4, dtype=torch.float32, device=device)
    seconds = best_seconds_per_call(data.sum, device, sizes.repeats, sizes.min_round_s)
    return data.nbytes / seconds


def copy_bandwidth(device: torch.device, sizes: MeasureSizes) -> float:
    source = torch.ones(sizes.bandwidth_bytes // 4, dtype=torch.float32, device=device)
    target = torch.empty_like(source)
    seconds = best_seconds_per_call(lambda: target.copy_(source), device, sizes.repeats, sizes.min_round_s)
    return 2 * source.nbytes / seconds


def matmul_rate(device: torch.device, dtype: str, m: int, width: int, sizes: MeasureSizes) -> MatmulRate:
    """FLOP/s of an (m x width) @ (width x width) product, the shape of a linear layer on m tokens."""
    torch_dtype = getattr(torch, dtype)
    left = torch.randn(m, width, dtype=torch_dtype, device=device)
    right = torch.randn(width, width, dtype=torch_dtype, device=device)
    out = torch.empty(m, width, dtype=torch_dtype, device=device)
    seconds = best_seconds_per_call(lambda: torch.mm(left, right, out=out), device, sizes.repeats, sizes.min_round_s)
    return MatmulRate(dtype, m, width, width, 2 * m * width * width / seconds)


def measure_roofline(device: torch.device, requested_dtype: str, sizes: MeasureSizes,
                     model_dir: str | None = None) -> Roofline:
    engine_dtype = dtype_name(compute_dtype(getattr(torch, requested_dtype), device, upcast_half_on_cpu=True))
    dtypes = list(dict.fromkeys([*BENCH_DTYPES, requested_dtype, engine_dtype]))
    linear_paths = None
    if device.type == "cpu":
        linear_paths = measure_linear_paths(BENCH_DTYPES, sizes.bandwidth_bytes, sizes.matmul_widths[0],
                                            sizes.matmul_rows[1:], sizes.repeats, sizes.min_round_s)
    return Roofline(
        device=str(device),
        num_threads=torch.get_num_threads(),
        engine_dtype=engine_dtype,
        read_bytes_per_s=read_bandwidth(device, sizes),
        copy_bytes_per_s=copy_bandwidth(device, sizes),
        matmuls=[
            matmul_rate(device, dtype, m, width, sizes)
            for dtype in dtypes for m in sizes.matmul_rows for width in sizes.matmul_widths
        ],
        model=model_dir,
        weights=None if model_dir is None else count_weights(model_dir),
        linear_paths=linear_paths,
    )
