"""Float32 weights plus bfloat16 copies that steps of few rows read through a compiled CPU kernel.

On CPUs without bfloat16 matrix instructions the engine computes a bfloat16 checkpoint in
float32 (see ``platforms.compute_dtype``), which doubles the bytes each decode step reads.
For steps of at most :data:`SMALL_BATCH_ROWS` rows, a layer holding a bfloat16 copy of its
weight runs the kernel in ``kernels/bf16_weight_linear.cpp`` instead: half the bytes, same
float32 math (widening bfloat16 is exact). Larger batches are compute-bound and keep the float32
matmul, as do all steps until the kernels have loaded (see ``kernels.cpu_extension``); the
results are the same either way, only the speed differs.
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.kernels.cpu_extension import cpu_kernels
from autoglm.models.linear_method.unquantized import UnquantizedLinearMethod

SMALL_BATCH_ROWS = 8  # up to here the kernel beat the float32 matmul on every layer shape measured
_K_MULTIPLE = 16  # the kernel reads 16 weights at a time


class CpuBf16WeightLinearMethod(UnquantizedLinearMethod):
    """The unquantized float32 weight, upcast from a bfloat16 checkpoint (so the copy is exact), and
    ``weight_bf16`` beside it where the kernel can read it (float32 on the CPU, ``in`` a multiple of 16)."""

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        weight = layer.weight
        readable = weight.dtype == torch.float32 and weight.device.type == "cpu" and weight.shape[1] % _K_MULTIPLE == 0
        layer.weight_bf16 = weight.detach().to(torch.bfloat16).contiguous() if readable else None

    def apply(self, layer: nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        weight_bf16 = layer.weight_bf16
        if weight_bf16 is not None and x.dim() == 2 and x.shape[0] <= SMALL_BATCH_ROWS:
            kernels = cpu_kernels()
            if kernels is not None:
                y = kernels.linear_bf16_weight(x, weight_bf16)
                return y if bias is None else y + bias
        return super().apply(layer, x, bias)

    def decode_weight_dtype(self, compute_dtype: torch.dtype) -> torch.dtype:
        return torch.bfloat16 if cpu_kernels() is not None else compute_dtype
