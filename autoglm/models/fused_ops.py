"""Where the decoder's elementwise steps take the fused CPU kernels (``kernels/fused_elementwise.cpp``).

RMSNorm, residual add + RMSNorm and rotary are each several PyTorch ops; on the
CPU, where a decode step's few rows make per-op overhead their cost, one compiled kernel does
each. They apply to float32 and bfloat16 CPU tensors in the steps that use the kernel library (it
builds in the background on a first start, and the engine switches to it between steps);
everything else takes the PyTorch code beside each call, which the kernels match (see the .cpp for where their rounding may differ).
"""
from __future__ import annotations

from types import ModuleType

import torch
import torch.nn.functional as F

from autoglm.kernels.cpu_extension import cpu_kernels
from autoglm.kernels.cpu_kernel_sources import AVX512_FLAGS
from autoglm.platforms import cpu_has_flags

FUSED_DTYPES = (torch.float32, torch.bfloat16)


def fused_kernels(*tensors: torch.Tensor) -> ModuleType | None:
    """The kernel library if the running step uses it and ``tensors`` are CPU tensors of one dtype it
    computes in."""
    library = cpu_kernels()
    if library is None:
        return None
    dtype = tensors[0].dtype
    if dtype in FUSED_DTYPES and all(t.device.type == "cpu" and t.dtype == dtype for t in tensors):
        return library
    return None


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for ``gate_up`` ``[T, 2 * inner]``: the AVX-512 kernel where the step uses the library
    (the native decode step calls the same one, so the two paths agree bit for bit), else PyTorch."""
    kernels = fused_kernels(gate_up)
    if kernels is not None and gate_up.dim() == 2 and cpu_has_flags(*AVX512_FLAGS):
        return kernels.silu_and_mul(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up
