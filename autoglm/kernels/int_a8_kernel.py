"""The compiled W8A8/W4A8 kernel (``int8_activation_linear.cpp``): which CPUs run it, and its call.

int8 or int4 weights times activations quantized to int8 per row, with AVX512-VNNI's ``vpdpbusd``: one
instruction per 64 weight bytes and row, so a decode step streams its weights at memory bandwidth. The
weight layout is ``models.linear_method.int_activation_weights``'s.
"""
from __future__ import annotations

import torch

from autoglm.kernels.cpu_extension import cpu_kernels
from autoglm.kernels.cpu_kernel_sources import AVX512_VNNI_FLAGS
from autoglm.platforms import cpu_has_flags

INT_A8_KERNEL = "int-a8-vnni"  # its name where a path is named (the profile)


def int_a8_missing_flags() -> tuple[str, ...]:
    """The CPU flags the kernel needs and this CPU lacks (or hides: ``AUTOGLM_CPU_DISABLE_FLAGS``)."""
    return tuple(flag for flag in AVX512_VNNI_FLAGS if not cpu_has_flags(flag))


def int_a8_linear(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None,
                  bits: int, group_size: int) -> torch.Tensor | None:
    """``x [rows, in]`` (float32 or bfloat16) times the packed weights, in ``x``'s dtype; None where the running
    step does not use the compiled library (the caller then takes PyTorch's path)."""
    library = cpu_kernels()
    if library is None:
        return None
    return library.linear_int_a8(x, packed, scales, bias, bits, group_size)
