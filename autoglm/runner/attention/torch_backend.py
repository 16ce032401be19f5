"""Portable attention in plain PyTorch: runs on the CPU and on any torch device."""
from __future__ import annotations

import torch
import torch.nn.functional as F

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
        slots = metadata.decode_slots
        keys = k_cache[slots].transpose(1, 2)  # [B, Hkv, L, D]
        values = v_cache[slots].transpose(1, 2)
        queries = q[:num_decodes].unsqueeze(2)  # [B, H, 1, D]
        attended = F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=metadata.decode_mask, scale=scale, enable_gqa=True
        )
        out[:num_decodes] = attended.squeeze(2)
    for span in metadata.prefills:
        rows = slice(span.start, span.start + span.query_len)
        queries = q[rows].transpose(0, 1)  # [H, Q, D]
        if span.context_slots is None:
            keys, values = k[rows].transpose(0, 1), v[rows].transpose(0, 1)
            attended = F.scaled_dot_product_attention(
                queries, keys, values, is_causal=True, scale=scale, enable_gqa=True
            )
        else:
            keys = k_cache[span.context_slots].transpose(0, 1)
            values = v_cache[span.context_slots].transpose(0, 1)
            attended = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=span.mask, scale=scale, enable_gqa=True
            )
        out[rows] = attended.transpose(0, 1)
    return out
