"""Paged attention in Triton: each query attends over its row's context read in place from the block table.

One kernel serves decode and prefill. A program takes one row, one KV head and a tile of the
row's queries (or, splitting a decode row, a partition of its keys: see ``decode_partitions``);
its matrix rows are (query token, query head of that KV head's group) pairs, so
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
DECODE_PARTITION_TOKENS = 512  # keys per split-decode program: a power of two, a multiple of KEY_TILE
# Fewer (decode row, KV head) programs than this leave most of a large GPU's SMs idle: split the keys instead.
TARGET_DECODE_PROGRAMS = 256
PARTITION_TILE = 8  # partitions merged per iteration of the reduce


@triton.jit
def _paged_attention_kernel(
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, k_scales_ptr, v_scales_ptr,
    block_tables_ptr, seq_lens_ptr, cu_seqlens_q_ptr, partial_out_ptr, partial_max_ptr, partial_sum_ptr,
    first_row, scale, head_dim, block_size, num_partitions,
    stride_q_token, stride_q_head, stride_out_token, stride_out_head,
    stride_cache_slot, stride_cache_head, stride_scales_slot, stride_table_row,
    GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, SCALED: tl.constexpr, DOT_PRECISION: tl.constexpr,
    PARTITION: tl.constexpr,
):
    row = tl.program_id(0) + first_row
    kv_head = tl.program_id(1)
    # The third index is a tile of queries, or with PARTITION (decode rows only) a partition of the keys.
    if PARTITION:
        first_token = 0
        keys_begin = tl.program_id(2) * PARTITION
    else:
        first_token = tl.program_id(2) * BLOCK_Q
        keys_begin = 0

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
    if PARTITION:
        keys_end = tl.minimum(keys_end, keys_begin + PARTITION)  # a partition past the row's context reads none

    running_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for key_start in range(keys_begin, keys_end, BLOCK_N):
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

    if PARTITION:
        # Left unnormalised: the reduce weighs each partition by its maximum and sum.
        partial = (tl.program_id(0) * tl.num_programs(1) * GROUP + head) * num_partitions + tl.program_id(2)
        tl.store(partial_max_ptr + partial, running_max, mask=query_valid)
        tl.store(partial_sum_ptr + partial, running_sum, mask=query_valid)
        tl.store(partial_out_ptr + partial[:, None] * head_dim + d[None, :], acc,
                 mask=query_valid[:, None] & d_valid[None, :])
    else:
        out = acc / tl.where(running_sum > 0, running_sum, 1.0)[:, None]  # a padding row that saw nothing: zeros
        tl.store(out_ptr + (q_start + token)[:, None] * stride_out_token + head[:, None] * stride_out_head
                 + d[None, :], out.to(out_ptr.dtype.element_ty), mask=query_valid[:, None] & d_valid[None, :])


@triton.jit
def _merge_partitions_kernel(
    out_ptr, partial_out_ptr, partial_max_ptr, partial_sum_ptr, seq_lens_ptr,
    head_dim, num_partitions, stride_out_token, stride_out_head,
    PARTITION: tl.constexpr, PARTITION_TILE: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """One decode row's query head: its partitions' outputs merged by their maxima and sums (log-sum-exp)."""
    row = tl.program_id(0)  # decode row r is token r
    head = tl.program_id(1)
    row_partitions = tl.cdiv(tl.load(seq_lens_ptr + row), PARTITION)  # later ones saw no key of this row
    first = (row * tl.num_programs(1) + head) * num_partitions
    d = tl.arange(0, BLOCK_D)
    d_valid = d < head_dim

    running_max = tl.full([], float("-inf"), dtype=tl.float32)
    running_sum = tl.full([], 0.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for tile_start in range(0, row_partitions, PARTITION_TILE):
        p = tile_start + tl.arange(0, PARTITION_TILE)
        p_valid = p < row_partitions
        maxima = tl.load(partial_max_ptr + first + p, mask=p_valid, other=float("-inf"))
        sums = tl.load(partial_sum_ptr + first + p, mask=p_valid, other=0.0)
        outs = tl.load(partial_out_ptr + (first + p)[:, None] * head_dim + d[None, :],
                       mask=p_valid[:, None] & d_valid[None, :], other=0.0)
        new_max = tl.maximum(running_max, tl.max(maxima, 0))
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)  # no partition with a key yet
        correction = tl.exp(running_max - safe_max)
        weights = tl.exp(maxima - safe_max)  # a partition without keys (maximum -inf) weighs nothing
        running_sum = running_sum * correction + tl.sum(sums * weights, 0)
        acc = acc * correction + tl.sum(outs * weights[:, None], 0)
        running_max = new_max

    out = acc / tl.where(running_sum > 0, running_sum, 1.0)
    tl.store(out_ptr + row * stride_out_token + head * stride_out_head + d, out.to(out_ptr.dtype.element_ty),
             mask=d_valid)


def decode_partitions(metadata: AttentionMetadata, num_kv_heads: int) -> int:
    """How many partitions of ``DECODE_PARTITION_TOKENS`` keys each decode row is split into; 1: one pass.

    Split when the (decode row, KV head) programs are too few to fill a GPU and the rows can be longer
    than one partition. Read from shapes alone (the block table's width bounds every context), never
    from this step's lengths: a CUDA graph keeps its grid for every replay, so one captured for a
    context capacity runs a program per partition of all of it, and those past a row's context read
    nothing. An eager step's table is as wide as its longest row.
    """
    if metadata.num_decode_tokens * num_kv_heads >= TARGET_DECODE_PROGRAMS:
        return 1
    return triton.cdiv(metadata.block_tables.shape[1] * metadata.block_size, DECODE_PARTITION_TOKENS)


def paged_attention(q: torch.Tensor, cache: LayerKVCache, metadata: AttentionMetadata, scale: float) -> torch.Tensor:
    """Queries ``[T, H, D]`` over their rows' cached contexts (this step's K/V already written): decode rows in
    one launch (or split over partitions of their keys, then merged, in two), the other rows (prefill, with or
    without a cached prefix) in another. Returns ``[T, H, D]``."""
    out = torch.empty_like(q)
    num_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = cache.keys.shape[1]
    group = num_heads // num_kv_heads
    group_pad = triton.next_power_of_2(group)
    scaled = cache.key_scales is not None
    # Scales are never read unscaled; the keys stand in so the kernel gets a pointer either way.
    k_scales = cache.key_scales if scaled else cache.keys
    v_scales = cache.value_scales if scaled else cache.values
    block_d = max(MIN_DOT, triton.next_power_of_2(head_dim))
    # Split-decode workspace: per (decode row, query head, partition) a maximum, a sum and an unnormalised output.
    partial_max = partial_sum = partial_out = out  # unread by one-pass launches

    def launch(first_row: int, num_rows: int, block_q: int, programs_per_row: int, partition: int = 0) -> None:
        block_m = max(MIN_DOT, block_q * group_pad)
        _paged_attention_kernel[(num_rows, num_kv_heads, programs_per_row)](
            out, q, cache.keys, cache.values, k_scales, v_scales,
            metadata.block_tables, metadata.seq_lens, metadata.cu_seqlens_q, partial_out, partial_max, partial_sum,
            first_row, scale, head_dim, metadata.block_size, programs_per_row,
            q.stride(0), q.stride(1), out.stride(0), out.stride(1),
            cache.keys.stride(0), cache.keys.stride(1), k_scales.stride(0), metadata.block_tables.stride(0),
            GROUP=group, GROUP_PAD=group_pad, BLOCK_Q=block_q, BLOCK_M=block_m, BLOCK_N=KEY_TILE,
            BLOCK_D=block_d, SCALED=scaled,
            # float32 models compare with transformers to 1e-4: no TF32 rounding of the products.
            DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32", PARTITION=partition,
        )

    num_decodes = metadata.num_decode_tokens
    partitions = decode_partitions(metadata, num_kv_heads) if num_decodes else 1
    if partitions > 1:
        partial_max = torch.empty(num_decodes, num_heads, partitions, dtype=torch.float32, device=q.device)
        partial_sum = torch.empty_like(partial_max)
        partial_out = torch.empty(num_decodes, num_heads, partitions, head_dim, dtype=torch.float32,
                                  device=q.device)
        launch(0, num_decodes, block_q=1, programs_per_row=partitions, partition=DECODE_PARTITION_TOKENS)
        _merge_partitions_kernel[(num_decodes, num_heads)](
            out, partial_out, partial_max, partial_sum, metadata.seq_lens,
            head_dim, partitions, out.stride(0), out.stride(1),
            PARTITION=DECODE_PARTITION_TOKENS, PARTITION_TILE=PARTITION_TILE, BLOCK_D=block_d,
        )
    elif num_decodes:
        launch(0, num_decodes, block_q=1, programs_per_row=1)
    if metadata.num_rows > num_decodes:
        block_q = max(1, PREFILL_QUERY_ROWS // group_pad)
        launch(num_decodes, metadata.num_rows - num_decodes, block_q, triton.cdiv(metadata.max_query_len, block_q))
    return out
