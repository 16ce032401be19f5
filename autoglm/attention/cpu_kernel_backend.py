"""Attention on CPUs with the compiled kernels: decode reads K/V in place from the blocks.

The kernels build in the background at engine start (``autoglm.kernels.cpu_extension``), so they
are looked up on every call: until they have loaded, and for caches that are not float32, decode
takes the portable torch path.
"""
from __future__ import annotations

import torch

from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.kernels.cpu_extension import cpu_kernels


class CpuKernelAttentionBackend(TorchAttentionBackend):
    """The torch backend, with decode rows through ``paged_decode_attention`` once it is loaded."""

    name = "cpu-kernel"

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, metadata: AttentionMetadata,
               scale: float) -> torch.Tensor:
        kernels = cpu_kernels() if k_cache.dtype == q.dtype == torch.float32 else None
        if kernels is None:
            return super().decode(q, k_cache, v_cache, metadata, scale)
        return kernels.paged_decode_attention(q, k_cache, v_cache, metadata.decode_block_tables(),
                                              metadata.decode_seq_lens(), metadata.block_size, scale)
