"""Decode attention read in place from KV blocks equals the gather-then-attend path."""
from __future__ import annotations

import random

import pytest
import torch

from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS
from autoglm.platforms import cpu_has_flags
from autoglm.attention.cpu_kernel_backend import paged_attention
from autoglm.attention.kv_cache_format import INT8
from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.attention.metadata import AttentionMetadata

pytestmark = [pytest.mark.cpu_isa,
              pytest.mark.skipif(not cpu_has_flags(*ATTENTION_CPU_FLAGS), reason="the kernel needs AVX-512")]


def decode_metadata(context_lens: list[int], block_size: int, num_blocks: int) -> AttentionMetadata:
    """Each sequence's blocks drawn at random from the pool, tables padded with block 0 as the engine does."""
    rng = random.Random(0)
    free = list(range(num_blocks))
    rng.shuffle(free)
    tables = [[free.pop() for _ in range(-(-length // block_size))] for length in context_lens]
    width = max(map(len, tables))
    return AttentionMetadata(
        slot_mapping=torch.zeros(0, dtype=torch.long),
        block_size=block_size,
        cu_seqlens_q=torch.arange(len(context_lens) + 1),
        seq_lens=torch.tensor(context_lens),
        block_tables=torch.tensor([table + [0] * (width - len(table)) for table in tables]),
        num_decode_tokens=len(context_lens),
        max_query_len=1,
        max_seq_len=max(context_lens),
        host_cu_seqlens_q=list(range(len(context_lens) + 1)),
        host_seq_lens=list(context_lens),
    )


def kernel_decode(q: torch.Tensor, cache: LayerKVCache, metadata: AttentionMetadata, scale: float) -> torch.Tensor:
    """The kernel over the decode rows of ``metadata``."""
    attend = paged_attention(q.dtype, cache, metadata.block_size)
    assert attend is not None, "the kernels have loaded, so the kernel reads this cache"
    return attend(q, metadata.decode_block_tables(), metadata.decode_seq_lens(), scale)


CONTEXT_LENS = [1, 5, 16, 17, 100, 130]  # partial and whole tiles of 16 keys and of 64 values


def gathered_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, metadata: AttentionMetadata,
                       scale: float) -> torch.Tensor:
    """PyTorch's attention over each sequence's K/V gathered into a padded, masked batch."""
    slots, mask = metadata.padded_decode_context()
    keys, values = k_cache[slots].transpose(1, 2), v_cache[slots].transpose(1, 2)
    return torch.nn.functional.scaled_dot_product_attention(
        q.unsqueeze(2), keys, values, attn_mask=mask, scale=scale, enable_gqa=True
    ).squeeze(2)


# GQA groups of 1, 4, 7 and 9 (more than the value pass holds in registers at once); head_dim a
# multiple of 16 or not (24).
@pytest.mark.parametrize("heads, kv_heads, head_dim",
                         [(4, 4, 32), (8, 2, 64), (14, 2, 64), (6, 1, 24), (7, 1, 24), (18, 2, 80)])
@pytest.mark.parametrize("block_size", [1, 16])
def test_in_place_decode_attention_matches_the_gathered_one(cpu_kernels, heads, kv_heads, head_dim, block_size):
    num_blocks = sum(-(-length // block_size) for length in CONTEXT_LENS) + 3
    k_cache = torch.randn(num_blocks * block_size, kv_heads, head_dim)
    v_cache = torch.randn(num_blocks * block_size, kv_heads, head_dim)
    q = torch.randn(len(CONTEXT_LENS), heads, head_dim)
    metadata = decode_metadata(CONTEXT_LENS, block_size, num_blocks)
    expected = gathered_attention(q, k_cache, v_cache, metadata, scale=0.3)
    got = kernel_decode(q, LayerKVCache(k_cache, v_cache), metadata, scale=0.3)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_decode_attention_softmax_holds_over_scores_hundreds_apart(cpu_kernels):
    """Scores spread over hundreds: most weights underflow to zero in the kernel's exp, as in PyTorch's.
    A score of a few hundred carries a float32 rounding of ~1e-5 in either implementation, which moves its
    softmax weight by as much relative to it: hence 1e-4 here, against 1e-5 for scores of unit size."""
    generator = torch.Generator().manual_seed(0)
    num_blocks = sum(CONTEXT_LENS) + 3
    k_cache = torch.randn(num_blocks, 2, 64, generator=generator)
    v_cache = torch.randn(num_blocks, 2, 64, generator=generator)
    q = torch.randn(len(CONTEXT_LENS), 14, 64, generator=generator) * 40
    metadata = decode_metadata(CONTEXT_LENS, 1, num_blocks)
    expected = gathered_attention(q, k_cache, v_cache, metadata, scale=0.3)
    got = kernel_decode(q, LayerKVCache(k_cache, v_cache), metadata, scale=0.3)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_kernel_refuses_a_context_longer_than_its_block_table(cpu_kernels):
    cache = torch.zeros(32, 1, 16)
    with pytest.raises(RuntimeError, match="context length"):
        cpu_kernels.paged_decode_attention(torch.zeros(1, 1, 16), cache, cache, torch.tensor([[0]]), torch.tensor([17]),
                                       16, 1.0)


@pytest.mark.parametrize("heads, kv_heads, head_dim", [(4, 4, 32), (8, 2, 64), (14, 2, 64), (7, 1, 24)])
@pytest.mark.parametrize("block_size", [1, 16])
def test_int8_decode_read_in_place_matches_the_dequantizing_torch_path(cpu_kernels, heads, kv_heads, head_dim,
                                                                       block_size):
    """Same stored int8 values and scales: the kernel widens them in its loops, the torch path gathers and dequantizes."""
    num_blocks = sum(-(-length // block_size) for length in CONTEXT_LENS) + 3
    slots = num_blocks * block_size
    cache = LayerKVCache(torch.zeros(slots, kv_heads, head_dim, dtype=torch.int8),
                         torch.zeros(slots, kv_heads, head_dim, dtype=torch.int8), INT8,
                         torch.zeros(slots, kv_heads), torch.zeros(slots, kv_heads))
    cache.write(torch.arange(slots), torch.randn(slots, kv_heads, head_dim) * 3, torch.randn(slots, kv_heads, head_dim))
    q = torch.randn(len(CONTEXT_LENS), heads, head_dim)
    metadata = decode_metadata(CONTEXT_LENS, block_size, num_blocks)
    expected = TorchAttentionBackend().decode(q, cache, metadata, scale=0.3)
    got = kernel_decode(q, cache, metadata, scale=0.3)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_int8_kernel_refuses_scales_of_the_wrong_shape(cpu_kernels):
    cache = torch.zeros(32, 1, 16, dtype=torch.int8)
    with pytest.raises(RuntimeError, match=r"k_scales and v_scales must be contiguous \[slots, kv_heads\] float32"):
        cpu_kernels.paged_decode_attention_int8(torch.zeros(1, 1, 16), cache, cache, torch.ones(32), torch.ones(32),
                                                torch.tensor([[0]]), torch.tensor([1]), 16, 1.0)


@pytest.mark.parametrize("heads, kv_heads, head_dim", [(4, 4, 32), (14, 2, 64), (6, 1, 24), (7, 1, 24)])
@pytest.mark.parametrize("block_size", [1, 16])
def test_bfloat16_decode_read_in_place_matches_float32_attention_on_the_same_values(cpu_kernels, heads, kv_heads,
                                                                                    head_dim, block_size):
    """A bfloat16 model's decode: float32 sums over the widened cache (exact), one rounding of the result to
    bfloat16, so within one bfloat16 step of float32 attention over the same bfloat16 values."""
    num_blocks = sum(-(-length // block_size) for length in CONTEXT_LENS) + 3
    k_cache = torch.randn(num_blocks * block_size, kv_heads, head_dim).to(torch.bfloat16)
    v_cache = torch.randn(num_blocks * block_size, kv_heads, head_dim).to(torch.bfloat16)
    q = torch.randn(len(CONTEXT_LENS), heads, head_dim).to(torch.bfloat16)
    metadata = decode_metadata(CONTEXT_LENS, block_size, num_blocks)
    expected = TorchAttentionBackend().decode(q.float(), LayerKVCache(k_cache.float(), v_cache.float()), metadata, 0.3)
    got = kernel_decode(q, LayerKVCache(k_cache, v_cache), metadata, scale=0.3)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected, rtol=2 ** -7, atol=1e-3)
