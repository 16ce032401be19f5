"""Paged attention in Triton: each query attends over its row's context read in place from the block table.

One kernel serves decode and prefill. A program takes one row, one KV head and a tile of the
row's queries; its matrix rows are (query token, query head of that KV head's group) pairs, so
the group's heads share every key and value load (grouped-query attention costs no extra
reads). Keys are walked in tiles of ``BLOCK_N`` positions, each position's slot looked up in the
block table, so any block size works, a block of one token included, and nothing is gathered.
Scores are softmaxed online in float32 (flash attention's running maximum and sum).

A scaled (int8) cache is widened with its per-(token, KV head) scales as it is loaded; an fp8
one is converted as loaded. Tiles keep to what GPUs require: power-of-two sizes and ``tl.dot``
operands of at least 16 in every dimension (padding, masked, where a group or a head is smaller).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata

MIN_DOT = 16  # smallest tl.dot dimension GPUs accept
KEY_TILE = 32  # key positions per loop iteration
PREFILL_QUERY_ROWS = 64  # matrix rows (tokens x group heads) per prefill program


@triton.jit
def _paged_attention_kernel(
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, k_scales_ptr, v_scales_ptr,
    block_tables_ptr, seq_lens_ptr, cu_seqlens_q_ptr,
    first_row, scale, head_dim, block_size,
    stride_q_token, stride_q_head, stride_out_token, stride_out_head,
    stride_cache_slot, stride_cache_head, stride_scales_slot, stride_table_row,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, SCALED: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    row = tl.program_id(0) + first_row
    kv_head = tl.program_id(1)
    first_token = tl.program_id(2) * BLOCK_Q

    q_start = tl.load(cu_seqlens_q_ptr + row)
    query_len = tl.load(cu_seqlens_q_ptr + row + 1) - q_start
    seq_len = tl.load(seq_lens_ptr + row)

    m = tl.arange(0, BLOCK_M)
    token = first_token + m // GROUP_PAD
    group_member = m % GROUP_PAD
    head = kv_head * GROUP + group_member
    query_valid = (token < query_len) & (group_member < GROUP)
    d = tl.arange(0, BLOCK_D)
    d_valid = d < head_dim

    q = tl.load(q_ptr + (q_start + token)[:, None] * stride_q_token + head[:, None] * stride_q_head + d[None, :],
                mask=query_valid[:, None] & d_valid[None, :], other=0.0)
    position = seq_len - query_len + token  # each query's place in its context: it sees keys up to here
    # Keys past the tile's last query are never seen; a tile past the row's queries reads none.
    keys_end = tl.minimum(seq_len, seq_len - query_len + first_token + BLOCK_Q)
    keys_end = tl.where(first_token < query_len, keys_end, 0)

    running_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for key_start in range(0, keys_end, BLOCK_N):
        n = key_start + tl.arange(0, BLOCK_N)
        n_valid = n < keys_end
        block = tl.load(block_tables_ptr + row * stride_table_row + n // block_size, mask=n_valid, other=0)
        slot = block.to(tl.int64) * block_size + n % block_size
        kv_offsets = slot * stride_cache_slot + kv_head * stride_cache_head
        kv_mask = n_valid[:, None] & d_valid[None, :]
        k = tl.load(k_cache_ptr + kv_offsets[:, None] + d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + kv_offsets[:, None] + d[None, :], mask=kv_mask, other=0.0)
        if SCALED:
            scales_offsets = slot * stride_scales_slot + kv_head
            k = k.to(tl.float32) * tl.load(k_scales_ptr + scales_offsets, mask=n_valid, other=0.0)[:, None]
            v = v.to(tl.float32) * tl.load(v_scales_ptr + scales_offsets, mask=n_valid, other=0.0)[:, None]
        k = k.to(q.dtype)
        v = v.to(q.dtype)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale
        allowed = n_valid[None, :] & (n[None, :] <= position[:, None]) & query_valid[:, None]
        scores = tl.where(allowed, scores, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(scores, 1))
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # a row that has seen no key yet
        correction = tl.exp(running_max - safe_max)
        weights = tl.exp(scores - safe_max[:, None])
        running_sum = running_sum * correction + tl.sum(weights, 1)
        acc = acc * correction[:, None] + tl.dot(weights.to(v.dtype), v, input_precision=DOT_PRECISION)
        running_max = new_max

    out = acc / tl.where(running_sum > 0, running_sum, 1.0)[:, None]  # a padding row that saw nothing: zeros
    tl.store(out_ptr + (q_start + token)[:, None] * stride_out_token + head[:, None] * stride_out_head + d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=query_valid[:, None] & d_valid[None, :])


def paged_attention(q: torch.Tensor, cache: LayerKVCache, metadata: AttentionMetadata, scale: float) -> torch.Tensor:
    """Queries ``[T, H, D]`` over their rows' cached contexts (this step's K/V already written): decode rows in
    one launch, the other rows (prefill, with or without a cached prefix) in a second. Returns ``[T, H, D]``."""
    out = torch.empty_like(q)
    num_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = cache.keys.shape[1]
    group = num_heads // num_kv_heads
    group_pad = triton.next_power_of_2(group)
    scaled = cache.key_scales is not None
    # Scales are never read unscaled; the keys stand in so the kernel gets a pointer either way.
    k_scales = cache.key_scales if scaled else cache.keys
    v_scales = cache.value_scales if scaled else cache.values

    def launch(first_row: int, num_rows: int, block_q: int, num_query_tiles: int) -> None:
        block_m = max(MIN_DOT, block_q * group_pad)
        _paged_attention_kernel[(num_rows, num_kv_heads, num_query_tiles)](
            out, q, cache.keys, cache.values, k_scales, v_scales,
            metadata.block_tables, metadata.seq_lens, metadata.cu_seqlens_q,
            first_row, scale, head_dim, metadata.block_size,
            q.stride(0), q.stride(1), out.stride(0), out.stride(1),
            cache.keys.stride(0), cache.keys.stride(1), k_scales.stride(0), metadata.block_tables.stride(0),
            GROUP=group, GROUP_PAD=group_pad, BLOCK_Q=block_q, BLOCK_M=block_m, BLOCK_N=KEY_TILE,
            BLOCK_D=max(MIN_DOT, triton.next_power_of_2(head_dim)), SCALED=scaled,
            # float32 models compare with transformers to 1e-4: no TF32 rounding of the products.
            DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        )

    num_decodes = metadata.num_decode_tokens
    if num_decodes:
        launch(0, num_decodes, block_q=1, num_query_tiles=1)
    if metadata.num_rows > num_decodes:
        block_q = max(1, PREFILL_QUERY_ROWS // group_pad)
        launch(num_decodes, metadata.num_rows - num_decodes, block_q, triton.cdiv(metadata.max_query_len, block_q))
    return out
