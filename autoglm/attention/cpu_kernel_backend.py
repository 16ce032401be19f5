"""Attention on CPUs with the compiled kernels: decode reads K/V in place from the blocks.

The kernels build in the background at engine start (``autoglm.kernels.cpu_extension``), so they
are looked up on every call: until they have loaded, and for float32 queries over a cache that
is neither float32 nor int8 (an fp8 one), decode takes the portable torch path.
"""
from __future__ import annotations

import torch

from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.kernels.cpu_extension import cpu_kernels


class CpuKernelAttentionBackend(TorchAttentionBackend):
    """The torch backend, with decode rows through ``paged_decode_attention`` once it is loaded."""

    name = "cpu-kernel"

    def decode(self, q: torch.Tensor, cache: LayerKVCache, metadata: AttentionMetadata, scale: float) -> torch.Tensor:
        kernels = cpu_kernels() if q.dtype == torch.float32 else None
        tables, lengths, block_size = metadata.decode_block_tables(), metadata.decode_seq_lens(), metadata.block_size
        if kernels is not None and cache.keys.dtype == torch.float32:
            return kernels.paged_decode_attention(q, cache.keys, cache.values, tables, lengths, block_size, scale)
        if kernels is not None and cache.keys.dtype == torch.int8:
            return kernels.paged_decode_attention_int8(q, cache.keys, cache.values, cache.key_scales,
                                                       cache.value_scales, tables, lengths, block_size, scale)
        return super().decode(q, cache, metadata, scale)
