"""Projections through a compiled CPU kernel: every step by default, or only steps of few rows
(``row_limits``), the rest through PyTorch.

Which kernel depends on the CPU and the compute dtype (``selection``): with bfloat16 units the
model stays in bfloat16 and ``bf16-dot-avx512`` reads its weights in place; without them the
model is computed in float32 (``platforms.compute_dtype``) and a ``bf16-weight-*`` kernel reads a
bfloat16 copy of each weight, half the bytes with the same float32 math (widening is exact).
Until the engine switches to the kernels (``kernels.cpu_extension``) every step takes PyTorch's path.
"""
from __future__ import annotations

import logging
import time

import torch
from torch import nn

from autoglm.kernels.linear_kernels import TORCH_PATH, CpuLinearKernel
from autoglm.models.linear_method.base import NativeLinear
from autoglm.models.linear_method.row_limits import MeasuredRowLimit, RowLimit
from autoglm.progress import announce

logger = logging.getLogger(__name__)
from autoglm.models.linear_method.unquantized import UnquantizedLinearMethod


class CpuKernelLinearMethod(UnquantizedLinearMethod):
    """The unquantized weight, plus ``kernel_weight``: the bfloat16 weight the kernel reads (the weight itself
    when it is bfloat16, else an exact copy of a float32 weight upcast from a bfloat16 checkpoint), or None
    where the kernel cannot read this layer (an input size it does not take)."""

    def __init__(self, kernel: CpuLinearKernel, row_limit: RowLimit) -> None:
        self.kernel = kernel
        self.row_limit = row_limit

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        weight = layer.weight.detach()
        if weight.dtype != self.kernel.activation_dtype or weight.device.type != "cpu":
            layer.kernel_weight = None
            return
        kernel_weight = weight.to(torch.bfloat16).contiguous()
        layer.kernel_weight = kernel_weight if self.kernel.reads(kernel_weight) else None

    def path(self, layer: nn.Module, x: torch.Tensor) -> str:
        """The kernel's name if a step with these rows goes through it, else ``torch``."""
        kernel_weight = layer.kernel_weight
        if kernel_weight is None or x.dim() != 2 or x.dtype != self.kernel.activation_dtype:
            return TORCH_PATH
        if x.shape[0] > self.row_limit.max_rows(self.kernel, kernel_weight, layer.weight):
            return TORCH_PATH
        return self.kernel.name

    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.path(layer, x) != TORCH_PATH:
            y = self.kernel(x, layer.kernel_weight, bias)
            if y is not None:
                return y
        return super().apply(layer, x, bias)

    def native_linear(self, layer: nn.Module) -> NativeLinear | None:
        kernel_weight = layer.kernel_weight
        if self.kernel.native_kind is None or kernel_weight is None or not self.kernel.runs_here():
            return None
        return NativeLinear(self.kernel.native_kind, kernel_weight, bias=layer.bias,
                            max_rows=self.row_limit.max_rows(self.kernel, kernel_weight, layer.weight))

    def describe(self, dtype: torch.dtype) -> str:
        return f"bfloat16 weights on the compiled kernel {self.kernel.name} for {self.row_limit.describe()}"

    def decode_weight_dtype(self, compute_dtype: torch.dtype) -> torch.dtype:
        return torch.bfloat16 if self.kernel.loaded() else compute_dtype


def measure_row_limits(model: nn.Module) -> None:
    """Measure now every row limit (``cpu_kernel_max_rows auto``) the model's first steps on the kernels
    would measure, saying so before and after: a start-up's or a switch's wait, not a request's. Call it
    with the kernels in use."""
    unknown = []
    for module in model.modules():
        method = getattr(module, "linear_method", None)
        if (isinstance(method, CpuKernelLinearMethod) and isinstance(method.row_limit, MeasuredRowLimit)
                and module.kernel_weight is not None and not method.row_limit.known(method.kernel, module.weight)):
            unknown.append((module, method))
    if not unknown:
        return
    shapes = len({(method.kernel.name, *module.weight.shape) for module, method in unknown})
    announce(logger, f"measuring up to how many rows the CPU kernels beat PyTorch's matmul on this machine "
                     f"({shapes} weight shape{'s' if shapes > 1 else ''}, once per machine)")
    started = time.perf_counter()
    for module, method in unknown:
        method.row_limit.max_rows(method.kernel, module.kernel_weight, module.weight)
    announce(logger, f"row limits measured in {time.perf_counter() - started:.1f} s")
