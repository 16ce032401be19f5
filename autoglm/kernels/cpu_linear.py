"""Decode-sized linear layers on the CPU that read bfloat16 weights and compute in float32.

On CPUs without bfloat16 matrix instructions the engine computes a bfloat16 checkpoint in
float32 (see ``platforms.compute_dtype``), which doubles the bytes each decode step reads.
For steps of at most :data:`SMALL_BATCH_ROWS` rows, a layer holding a bfloat16 copy of its
weight runs the kernel in ``bf16_weight_linear.cpp`` instead: half the bytes, same float32
math (widening bfloat16 is exact). Larger batches are compute-bound and keep the float32
matmul, as do all steps until the kernels have loaded (see ``cpu_extension``); the results are
the same either way, only the speed differs.
"""
from __future__ import annotations

import torch
from torch import nn

from autoglm.kernels.cpu_extension import cpu_kernels

SMALL_BATCH_ROWS = 8  # up to here the kernel beat the float32 matmul on every layer shape measured
_K_MULTIPLE = 16  # the kernel reads 16 weights at a time


def keep_bf16_weight_copies(modules: list[nn.Module]) -> int:
    """Give each module's float32 ``weight``, upcast from a bfloat16 checkpoint (so the copy is exact),
    a bfloat16 copy ``weight_bf16`` for small batches; returns how many got one."""
    count = 0
    for module in modules:
        weight = module.weight
        if weight.dtype == torch.float32 and weight.device.type == "cpu" and weight.shape[1] % _K_MULTIPLE == 0:
            module.weight_bf16 = weight.detach().to(torch.bfloat16).contiguous()
            count += 1
    return count


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           weight_bf16: torch.Tensor | None) -> torch.Tensor:
    """``F.linear``, through the bfloat16-weight kernel when it has loaded, there is a copy and few rows."""
    if weight_bf16 is not None and x.dim() == 2 and x.shape[0] <= SMALL_BATCH_ROWS:
        kernels = cpu_kernels()
        if kernels is not None:
            y = kernels.linear_bf16_weight(x, weight_bf16)
            return y if bias is None else y + bias
    return torch.nn.functional.linear(x, weight, bias)
