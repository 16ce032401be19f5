"""Portable attention in plain PyTorch: runs on the CPU and on any torch device.

On CPUs where the compiled kernels load (``autoglm.kernels.cpu_extension``) and the cache is
float32, decode attention reads K/V in place from the blocks instead of gathering them.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autoglm.kernels.cpu_extension import load_cpu_kernels
from autoglm.runner.attention.metadata import AttentionMetadata


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    metadata: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Write this step's K/V into the cache, then attend each query over its context."""
    k_cache.index_copy_(0, metadata.slot_mapping, k)
    v_cache.index_copy_(0, metadata.slot_mapping, v)
    out = torch.empty_like(q)
    num_decodes = metadata.num_decode_tokens
    if num_decodes:
        out[:num_decodes] = decode_attention(q[:num_decodes], k_cache, v_cache, metadata, scale)
    for span in metadata.prefills:
        rows = slice(span.start, span.start + span.query_len)
        # [1, heads, tokens, head_dim]: with a batch dimension the CPU takes its flash kernel,
        # 7x faster on a 2k-token prompt than the 3-D path, which materialises every score.
        queries = q[rows].transpose(0, 1).unsqueeze(0)
        if span.context_slots is None:
            keys, values = k[rows].transpose(0, 1).unsqueeze(0), v[rows].transpose(0, 1).unsqueeze(0)
            attended = F.scaled_dot_product_attention(
                queries, keys, values, is_causal=True, scale=scale, enable_gqa=True
            )
        else:
            keys = k_cache[span.context_slots].transpose(0, 1).unsqueeze(0)
            values = v_cache[span.context_slots].transpose(0, 1).unsqueeze(0)
            attended = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=span.mask, scale=scale, enable_gqa=True
            )
        out[rows] = attended[0].transpose(0, 1)
    return out


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, metadata: AttentionMetadata,
                     scale: float) -> torch.Tensor:
    """One query per sequence over its whole cached context: ``[B, H, D]`` in and out."""
    kernels = load_cpu_kernels() if q.device.type == "cpu" and k_cache.dtype == q.dtype == torch.float32 else None
    if kernels is not None:
        return kernels.paged_decode_attention(q, k_cache, v_cache, metadata.decode_block_tables,
                                              metadata.decode_context_lens, metadata.block_size, scale)
    slots, mask = metadata.padded_decode_context()
    keys = k_cache[slots].transpose(1, 2)  # [B, Hkv, L, D]
    values = v_cache[slots].transpose(1, 2)
    attended = F.scaled_dot_product_attention(
        q.unsqueeze(2), keys, values, attn_mask=mask, scale=scale, enable_gqa=True  # queries [B, H, 1, D]
    )
    return attended.squeeze(2)
