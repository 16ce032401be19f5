"""The Triton backend against the torch one on random steps: on a GPU, or run as a script in Triton's interpreter.

As a script (``TRITON_INTERPRET=1``, in a subprocess: Triton reads the variable when a kernel is
defined, and an interpreted kernel must not leak into other tests) it prints each case's largest
error as one line of JSON, in float32 only: the interpreter computes bfloat16 wrongly.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from unittest import mock

import torch

from autoglm.attention import triton_paged_attention
from autoglm.attention.kv_cache_format import AUTO, FP8_E4M3, INT8, KVCacheFormat
from autoglm.attention.layer import Attention
from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.attention.triton_backend import TritonAttentionBackend

# (query_len, seq_len) per row, decode rows first: a step with decodes, a fresh prompt and a chunk after a
# cached prefix longer than one key tile.
MIXED_ROWS = [(1, 9), (1, 40), (1, 1), (5, 5), (18, 53)]
# Decode rows split into partitions of SPLIT_PARTITION keys: ten (the last partial), two full, two (the last
# partial) and one; the one-token row's other partitions see no key. A prompt follows in its own launch.
SPLIT_PARTITION = 32
SPLIT_ROWS = [(1, 300), (1, 64), (1, 40), (1, 1), (7, 70)]
SPLIT = dict(rows=SPLIT_ROWS, partition_tokens=SPLIT_PARTITION)
CASES = {
    "block1-gqa3": dict(block_size=1, num_heads=6, num_kv_heads=2, head_dim=16),
    "block16-gqa2": dict(block_size=16, num_heads=4, num_kv_heads=2, head_dim=16),
    "block32-mha": dict(block_size=32, num_heads=2, num_kv_heads=2, head_dim=32),
    "block16-head8": dict(block_size=16, num_heads=4, num_kv_heads=1, head_dim=8),
    "block16-gqa2-int8": dict(block_size=16, num_heads=4, num_kv_heads=2, head_dim=16, kv_format=INT8),
    "block16-gqa2-fp8": dict(block_size=16, num_heads=4, num_kv_heads=2, head_dim=16, kv_format=FP8_E4M3),
    "split-block1-gqa3": dict(block_size=1, num_heads=6, num_kv_heads=2, head_dim=16, **SPLIT),
    "split-block16-gqa2": dict(block_size=16, num_heads=4, num_kv_heads=2, head_dim=16, **SPLIT),
    "split-block32-mha": dict(block_size=32, num_heads=2, num_kv_heads=2, head_dim=32, **SPLIT),
    "split-block16-gqa2-int8": dict(block_size=16, num_heads=4, num_kv_heads=2, head_dim=16, kv_format=INT8,
                                    **SPLIT),
}


def step_metadata(rows: list[tuple[int, int]], block_size: int, generator: torch.Generator) -> AttentionMetadata:
    """Each row's blocks drawn at random from one pool, so rows interleave in it; this step's tokens are each
    row's last ``query_len`` positions."""
    blocks_per_row = [-(-seq_len // block_size) for _, seq_len in rows]
    order = torch.randperm(sum(blocks_per_row) + 3, generator=generator)  # a few blocks no row uses
    tables = torch.zeros(len(rows), max(blocks_per_row), dtype=torch.long)
    slots, starts, first = [], [0], 0
    for row, ((query_len, seq_len), count) in enumerate(zip(rows, blocks_per_row)):
        tables[row, :count] = order[first : first + count]
        first += count
        for position in range(seq_len - query_len, seq_len):
            slots.append(int(tables[row, position // block_size]) * block_size + position % block_size)
        starts.append(starts[-1] + query_len)
    seq_lens = [seq_len for _, seq_len in rows]
    return AttentionMetadata(
        slot_mapping=torch.tensor(slots), block_size=block_size, cu_seqlens_q=torch.tensor(starts),
        seq_lens=torch.tensor(seq_lens), block_tables=tables,
        num_decode_tokens=sum(1 for query_len, _ in rows if query_len == 1),
        max_query_len=max(query_len for query_len, _ in rows), max_seq_len=max(seq_lens),
        host_cu_seqlens_q=starts, host_seq_lens=seq_lens,
    )


def random_cache(num_slots: int, num_kv_heads: int, head_dim: int, kv_format: KVCacheFormat,
                 generator: torch.Generator) -> LayerKVCache:
    """A cache full of random (stored) values: whatever a row wrongly reads shows in its output."""
    keys, values = torch.randn(2, num_slots, num_kv_heads, head_dim, generator=generator)
    stored_keys, key_scales = kv_format.quantize(keys)
    stored_values, value_scales = kv_format.quantize(values)
    return LayerKVCache(stored_keys, stored_values, kv_format, key_scales, value_scales)


def moved(cache: LayerKVCache, device: torch.device, dtype: torch.dtype) -> LayerKVCache:
    """A copy of ``cache`` on ``device``, its unscaled values in ``dtype`` (scaled ones keep their storage)."""
    def copy(tensor: torch.Tensor | None, to_dtype: torch.dtype | None = None) -> torch.Tensor | None:
        return None if tensor is None else tensor.to(device, to_dtype, copy=True)

    values_dtype = None if cache.format.storage_dtype else dtype
    return LayerKVCache(copy(cache.keys, values_dtype), copy(cache.values, values_dtype), cache.format,
                        copy(cache.key_scales), copy(cache.value_scales))


def max_error(block_size: int, num_heads: int, num_kv_heads: int, head_dim: int, kv_format: KVCacheFormat = AUTO,
              rows: list[tuple[int, int]] = MIXED_ROWS, partition_tokens: int | None = None,
              device: torch.device = torch.device("cpu"), dtype: torch.dtype = torch.float32) -> float:
    """Largest difference between the Triton backend in ``dtype`` and the torch one in float32, on one step of
    ``rows``; with ``partition_tokens``, its decode rows split into partitions of that many keys."""
    generator = torch.Generator().manual_seed(0)
    metadata = step_metadata(rows, block_size, generator)
    num_tokens = metadata.host_cu_seqlens_q[-1]
    cache = random_cache(int(metadata.block_tables.max() + 4) * block_size, num_kv_heads, head_dim, kv_format,
                         generator)
    q = torch.randn(num_tokens, num_heads, head_dim, generator=generator)
    k, v = torch.randn(2, num_tokens, num_kv_heads, head_dim, generator=generator)
    outputs = []
    with split_decode(partition_tokens):
        assert (triton_paged_attention.decode_partitions(metadata, num_kv_heads) > 1) == bool(partition_tokens)
        for backend, run_dtype in ((TorchAttentionBackend(), torch.float32), (TritonAttentionBackend(), dtype)):
            layer = Attention(num_heads, num_kv_heads, head_dim, scale=head_dim**-0.5)
            layer.kv_cache = moved(cache, device, run_dtype)
            step = metadata_on(metadata, device)
            inputs = (x.to(device, run_dtype) for x in (q, k, v))
            outputs.append(backend.forward(*inputs, layer.kv_cache, layer.scale, step).float().cpu())
    return float((outputs[0] - outputs[1]).abs().max())


def split_decode(partition_tokens: int | None) -> mock._patch | contextlib.nullcontext:
    """Decode rows split into partitions of ``partition_tokens`` keys; ``None``: the kernel's own choice."""
    if partition_tokens is None:
        return contextlib.nullcontext()
    return mock.patch.object(triton_paged_attention, "DECODE_PARTITION_TOKENS", partition_tokens)


def metadata_on(metadata: AttentionMetadata, device: torch.device) -> AttentionMetadata:
    return dataclasses.replace(metadata, slot_mapping=metadata.slot_mapping.to(device),
                               cu_seqlens_q=metadata.cu_seqlens_q.to(device), seq_lens=metadata.seq_lens.to(device),
                               block_tables=metadata.block_tables.to(device), _derived={})


if __name__ == "__main__":
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    print(json.dumps({name: max_error(**case) for name, case in CASES.items()}))
