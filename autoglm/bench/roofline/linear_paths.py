"""How fast each way of computing a linear layer runs here: PyTorch's matmul in each dtype and every
compiled CPU kernel this CPU runs, at one row (bandwidth: how fast weights stream) and at batches
(FLOP/s), and up to how many rows each kernel beats PyTorch. ``bench roofline`` prints these so a
user sees why the engine takes the path it takes on this machine."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autoglm.bench.lib.timing import best_seconds_per_call
from autoglm.bench.results.roofline import LinearPathRate, LinearPaths
from autoglm.kernels.cpu_extension import wait_for_cpu_kernels
from autoglm.kernels.linear_kernels import CPU_LINEAR_KERNELS, TORCH_PATH, CpuLinearKernel
from autoglm.models.linear_method.row_limits import measure_row_limit


@dataclass(frozen=True)
class _Path:
    name: str
    activation: torch.dtype
    weight: torch.dtype
    kernel: CpuLinearKernel | None

    def run(self, x: torch.Tensor, weight: torch.Tensor):
        if self.kernel is None:
            return lambda: F.linear(x, weight)
        return lambda: self.kernel(x, weight)


def _paths(dtypes: list[str], with_kernels: bool) -> list[_Path]:
    paths = [_Path(TORCH_PATH, getattr(torch, dtype), getattr(torch, dtype), None) for dtype in dtypes]
    kernels = [kernel for kernel in CPU_LINEAR_KERNELS if kernel.runs_here()] if with_kernels else []
    return paths + [_Path(kernel.name, kernel.activation_dtype, torch.bfloat16, kernel) for kernel in kernels]


def measure_linear_paths(dtypes: list[str], gemv_weight_bytes: int, width: int, rows: tuple[int, ...],
                         repeats: int, min_round_s: float) -> LinearPaths:
    """One-row products on a ``[gemv_weight_bytes / (2 width), width]`` bfloat16 weight (larger than any cache,
    so they stream from memory), and ``rows`` x ``width`` x ``width`` products; both for every path."""
    cpu = torch.device("cpu")
    paths = _paths(dtypes, with_kernels=wait_for_cpu_kernels() is not None)
    generator = torch.Generator().manual_seed(0)
    rates = []
    shapes = [(1, gemv_weight_bytes // (2 * width)), *((m, width) for m in rows)]
    for m, n in shapes:
        weight_bf16 = torch.randn(n, width, generator=generator).to(torch.bfloat16)
        for path in paths:
            weight = weight_bf16 if path.kernel is not None else weight_bf16.to(path.weight)
            x = torch.randn(m, width, generator=generator).to(path.activation)
            seconds = best_seconds_per_call(path.run(x, weight), cpu, repeats, min_round_s)
            rates.append(LinearPathRate(path.name, _name(path.activation), _name(path.weight), m, width, n, seconds))
    square = torch.randn(width, width, generator=generator).to(torch.bfloat16)
    row_limits = {path.name: measure_row_limit(path.kernel, square, square.to(path.activation))
                  for path in paths if path.kernel is not None}
    missing = {kernel.name: list(kernel.missing_flags()) for kernel in CPU_LINEAR_KERNELS if not kernel.runs_here()}
    return LinearPaths(rates, row_limits, missing)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
