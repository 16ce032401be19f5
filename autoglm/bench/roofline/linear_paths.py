"""How fast each way of computing a linear layer runs here: PyTorch's matmul in each dtype and every
compiled CPU kernel this CPU runs, at one row (bandwidth: how fast weights stream) and at batches
(FLOP/s), and up to how many rows each kernel beats PyTorch. ``bench roofline`` prints these so a
user sees why the engine takes the path it takes on this machine."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autoglm.bench.results.report import format_table
from autoglm.bench.lib.timing import best_seconds_per_call
from autoglm.kernels.cpu_extension import wait_for_cpu_kernels
from autoglm.kernels.linear_kernels import CPU_LINEAR_KERNELS, TORCH_PATH, CpuLinearKernel
from autoglm.models.linear_method.row_limits import measure_row_limit

KERNEL_WAIT_S = 900.0  # a first build on a busy machine; a bound to catch a hang
GIGA = 1e9


@dataclass(frozen=True)
class LinearPathRate:
    """One path on one ``[m, k] x [n, k]^T`` product."""

    path: str  # "torch" or a kernel's name
    activation_dtype: str
    weight_dtype: str
    m: int
    k: int
    n: int
    seconds: float

    @property
    def weight_bytes_per_s(self) -> float:
        return self.n * self.k * getattr(torch, self.weight_dtype).itemsize / self.seconds

    @property
    def flops_per_s(self) -> float:
        return 2 * self.m * self.k * self.n / self.seconds


@dataclass(frozen=True)
class LinearPaths:
    rates: list[LinearPathRate]
    row_limits: dict[str, int]  # kernel name: rows up to which it beat PyTorch on the batch shape
    missing: dict[str, list[str]]  # kernel name: the CPU flags it needs and this CPU lacks


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
    paths = _paths(dtypes, with_kernels=wait_for_cpu_kernels(KERNEL_WAIT_S) is not None)
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


def linear_paths_rows(paths: LinearPaths) -> tuple[list[str], list[list[str]]]:
    """A row per path: its one-row weight bandwidth, its FLOP/s per batch size, its measured row limit."""
    batch_rows = sorted({rate.m for rate in paths.rates if rate.m > 1})
    header = ["path", "activations x weights", "1 row: GB/s of weights", *(f"{m} rows: GFLOP/s" for m in batch_rows),
              "kernel up to (rows)"]
    table = []
    for name in dict.fromkeys((rate.path, rate.activation_dtype) for rate in paths.rates):
        rates = {rate.m: rate for rate in paths.rates if (rate.path, rate.activation_dtype) == name}
        first = next(iter(rates.values()))
        table.append([
            name[0], f"{first.activation_dtype} x {first.weight_dtype}",
            f"{rates[1].weight_bytes_per_s / GIGA:.1f}" if 1 in rates else "-",
            *(f"{rates[m].flops_per_s / GIGA:.0f}" if m in rates else "-" for m in batch_rows),
            str(paths.row_limits.get(name[0], "-")),
        ])
    return header, table


def missing_kernels(paths: LinearPaths) -> str:
    """``<kernel> (needs <flags>), ...``: the kernels this CPU cannot run; empty where it runs them all."""
    return ", ".join(f"{name} (needs {' '.join(flags)})" for name, flags in paths.missing.items())


def linear_paths_table(paths: LinearPaths) -> str:
    header, rows = linear_paths_rows(paths)
    missing = missing_kernels(paths)
    return format_table(header, rows, text_columns=2) + (f"\nnot on this CPU: {missing}" if missing else "")
