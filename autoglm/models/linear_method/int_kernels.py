"""The ways to multiply by int8/int4 weights, and which one each step uses.

``dequantized_linear`` works on every device: widen the weight to the activations' dtype, then an
ordinary matmul. On the CPU PyTorch has fused ops that read the integer weights and widen them in
registers, so a decode step reads 1 (int8) or 0.5 (int4) bytes per weight instead of 4:
``torch._weight_int8pack_mm`` (one scale per output channel) and ``torch._weight_int4pack_mm_for_cpu``
(groups of 32 to 256 columns). ``autoglm bench quant-kernels`` measures all of them per row count on
real layer shapes; docs/QUANTIZATION.md records the measurement this choice follows.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autoglm.models.linear_method.int_weights import dequantize

INT4_PACK_GROUP_SIZES = (32, 64, 128, 256)  # what _weight_int4pack_mm_for_cpu accepts
INT4_PACK_OFFSET = 8  # the op stores unsigned nibbles: w = (nibble - 8) * scale + zero
# Up to this many rows the fused int8 op beat dequantize-then-matmul on every measured shape (it lost at 64).
INT8_FUSED_MAX_ROWS = 16


def dequantized_linear(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor,
                       bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x (q * scale)^T + b``: the portable path, and the float reference every other path equals."""
    return F.linear(x, dequantize(q, scale, x.dtype), bias)


def int8_fused_linear(x: torch.Tensor, q: torch.Tensor, channel_scale: torch.Tensor) -> torch.Tensor:
    """PyTorch's int8-weight matmul for one scale per output channel (``channel_scale [out]``)."""
    rows = x.reshape(-1, x.shape[-1])
    y = torch._weight_int8pack_mm(rows, q, channel_scale.to(x.dtype))
    return y.reshape(*x.shape[:-1], q.shape[0])


def pack_int4(q: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(packed, scales_and_zeros)`` for :func:`int4_fused_linear` from int4 values in int8 and ``scale [out, groups]``."""
    packed = torch._convert_weight_to_int4pack_for_cpu((q.to(torch.int32) + INT4_PACK_OFFSET).contiguous(), 1)
    scales_and_zeros = torch.stack([scale.t(), torch.zeros_like(scale.t())], dim=-1).contiguous()
    return packed, scales_and_zeros


def int4_fused_linear(x: torch.Tensor, packed: torch.Tensor, scales_and_zeros: torch.Tensor) -> torch.Tensor:
    """PyTorch's int4-weight matmul on :func:`pack_int4`'s layout."""
    rows = x.reshape(-1, x.shape[-1])
    group_size = x.shape[-1] // scales_and_zeros.shape[0]
    y = torch._weight_int4pack_mm_for_cpu(rows, packed, group_size, scales_and_zeros.to(x.dtype))
    return y.reshape(*x.shape[:-1], packed.shape[0])
