"""Attention on CPUs with the compiled kernels: decode reads K/V in place from the blocks.

The kernels build in the background at engine start (``autoglm.kernels.cpu_extension``), so they
are looked up on every call: until they have loaded, and for a cache that is neither float32,
bfloat16 nor int8 (an fp8 one), decode takes the portable torch path. A bfloat16 model's queries
are widened to float32 for the kernel (exact) and its results rounded back, as attention in
bfloat16 computes its sums in float32 too.
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
        kernels = cpu_kernels() if q.dtype in (torch.float32, torch.bfloat16) else None
        if kernels is None or cache.keys.dtype not in (torch.float32, torch.bfloat16, torch.int8):
            return super().decode(q, cache, metadata, scale)
        query = q.float()
        tables, lengths, block_size = metadata.decode_block_tables(), metadata.decode_seq_lens(), metadata.block_size
        if cache.keys.dtype == torch.int8:
            out = kernels.paged_decode_attention_int8(query, cache.keys, cache.values, cache.key_scales,
                                                      cache.value_scales, tables, lengths, block_size, scale)
        else:
            decode = kernels.paged_decode_attention_bf16 if cache.keys.dtype == torch.bfloat16 else \
                kernels.paged_decode_attention
            out = decode(query, cache.keys, cache.values, tables, lengths, block_size, scale)
        return out.to(q.dtype)
