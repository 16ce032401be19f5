"""Which attention backend an engine uses, chosen once at start from its device and dtype."""
from __future__ import annotations

import importlib.util

import torch

from autoglm.attention.backend import AttentionBackend
from autoglm.attention.cpu_kernel_backend import CpuKernelAttentionBackend
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS
from autoglm.platforms import cpu_has_flags


def triton_available() -> bool:
    """Whether Triton is installed (PyTorch's CUDA builds bring it)."""
    return importlib.util.find_spec("triton") is not None


def select_attention_backend(device: torch.device, dtype: torch.dtype,
                             every_query_alone: bool = True) -> AttentionBackend:
    """On CUDA the Triton paged-attention backend; on a CPU that can run the compiled kernels, for float32 or
    bfloat16 compute, the kernel backend (its decode reads float32, bfloat16 and int8 caches in place; with
    ``every_query_alone`` a prompt's queries too); else the portable torch one."""
    if device.type == "cuda" and triton_available():
        from autoglm.attention.triton_backend import TritonAttentionBackend  # imports Triton: only where used

        return TritonAttentionBackend()
    if device.type == "cpu" and dtype in (torch.float32, torch.bfloat16) and cpu_has_flags(*ATTENTION_CPU_FLAGS):
        return CpuKernelAttentionBackend(every_query_alone)
    return TorchAttentionBackend()
