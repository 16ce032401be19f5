"""Attention on CPUs with the compiled kernels: decode reads K/V in place from the blocks.

The kernels build in the background at engine start and the engine switches to them between steps
(``autoglm.kernels.cpu_extension``), so they are looked up on every call: until then, and for a
cache that is neither float32, bfloat16 nor int8 (an fp8 one), attention takes the portable torch
path. A bfloat16 model's queries are widened to float32 for the kernel (exact) and its results
rounded back, as attention in bfloat16 computes its sums in float32 too.

By default every query, a prompt's too, is attended by the same kernel, alone over its causal
context, so each token gets bitwise what a decode step of that token alone would compute, whatever
the batch, the chunk its prompt was split into or the prefix found cached; PyTorch's flash attention
over a row rounds differently with the row's length, and greedy decoding in bfloat16 would follow
such a near-tie. ``every_query_alone=False`` leaves rows longer than a speculative verification
(the last token and its proposals) to PyTorch's attention: faster prompts, last bits that vary.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.kernels.cpu_extension import cpu_kernels
from autoglm.config.speculative import MAX_SPECULATIVE_TOKENS

# A decode step's token and every token it may propose: rows up to this long attend query by query.
MAX_PER_QUERY_ROW_LEN = 1 + MAX_SPECULATIVE_TOKENS

PagedAttention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor]


class CpuKernelAttentionBackend(TorchAttentionBackend):
    """The torch backend, with every query (or those of decode rows and short rows) through
    ``paged_decode_attention`` once it is loaded."""

    name = "cpu-kernel"

    def __init__(self, every_query_alone: bool = True) -> None:
        self.max_per_query_row_len = sys.maxsize if every_query_alone else MAX_PER_QUERY_ROW_LEN

    def decodes_in_place(self, kv_cache: LayerKVCache, dtype: torch.dtype) -> bool:
        """For an unscaled float32 or bfloat16 cache of the queries' dtype, once the kernels are in use."""
        return (cpu_kernels() is not None and dtype in (torch.float32, torch.bfloat16) and kv_cache.keys.dtype == dtype
                and kv_cache.key_scales is None)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: LayerKVCache, scale: float,
                metadata: AttentionMetadata) -> torch.Tensor:
        attend = paged_attention(q.dtype, kv_cache, metadata.block_size)
        if attend is None:
            return super().forward(q, k, v, kv_cache, scale, metadata)
        k, v = kv_cache.write(metadata.slot_mapping, k, v)
        out = torch.empty_like(q)
        queries = metadata.token_queries(self.max_per_query_row_len)
        if queries.any:
            out[queries.tokens] = attend(q[queries.tokens], queries.block_tables, queries.context_lens, scale)
        for row in queries.other_rows:
            self.attend_row(out, q, k, v, kv_cache, metadata, row, scale)
        return out


def paged_attention(dtype: torch.dtype, cache: LayerKVCache, block_size: int) -> PagedAttention | None:
    """The kernel reading ``cache`` in place: queries ``[N, H, D]`` of ``dtype``, each with its block table
    and context length, in; ``[N, H, D]`` out. None in a step without the kernels, or for a dtype or cache
    format the kernel does not read."""
    kernels = cpu_kernels() if dtype in (torch.float32, torch.bfloat16) else None
    if kernels is None or cache.keys.dtype not in (torch.float32, torch.bfloat16, torch.int8):
        return None

    def attend(q: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor, scale: float) -> torch.Tensor:
        query = q.float()
        if cache.keys.dtype == torch.int8:
            out = kernels.paged_decode_attention_int8(query, cache.keys, cache.values, cache.key_scales,
                                                      cache.value_scales, tables, lengths, block_size, scale)
        else:
            decode = kernels.paged_decode_attention_bf16 if cache.keys.dtype == torch.bfloat16 else \
                kernels.paged_decode_attention
            out = decode(query, cache.keys, cache.values, tables, lengths, block_size, scale)
        return out.to(q.dtype)

    return attend
