"""The backend an engine starts with, and what each backend promises."""
from __future__ import annotations

import pytest
import torch

from autoglm.attention import select_attention_backend
from autoglm.attention import cpu_kernel_backend, selector
from autoglm.attention.cpu_kernel_backend import CpuKernelAttentionBackend
from autoglm.attention.layer import Attention
from autoglm.attention.kv_cache_format import FP8_E4M3, INT8
from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.torch_backend import TorchAttentionBackend
from autoglm.attention.triton_backend import TritonAttentionBackend
from autoglm.engine.plan_builder import build_step_plan
from autoglm.engine.sequence import Sequence
from autoglm.sampling_params import SamplingParams

CPU = torch.device("cpu")


@pytest.mark.parametrize("has_flags, device, dtype, expected", [
    (True, "cpu", torch.float32, CpuKernelAttentionBackend),
    (True, "cpu", torch.bfloat16, CpuKernelAttentionBackend),
    (True, "cpu", torch.float16, TorchAttentionBackend),
    (False, "cpu", torch.float32, TorchAttentionBackend),
    (True, "cuda", torch.float32, TritonAttentionBackend),
    (False, "cuda", torch.bfloat16, TritonAttentionBackend),
])
def test_the_kernel_backend_is_chosen_only_where_its_kernel_can_run(monkeypatch, has_flags, device, dtype, expected):
    monkeypatch.setattr(selector, "cpu_has_flags", lambda *flags: has_flags)
    assert type(select_attention_backend(torch.device(device), dtype)) is expected


def test_cuda_without_triton_takes_the_torch_backend(monkeypatch):
    monkeypatch.setattr(selector, "triton_available", lambda: False)
    assert type(select_attention_backend(torch.device("cuda"), torch.bfloat16)) is TorchAttentionBackend


def step_metadata(backend, chunk_len: int = 3, later_chunk_len: int | None = None):
    """Two decode rows (contexts 5 and 3) and a chunk of ``chunk_len`` tokens after a 4-token cached prefix
    (then, if given, a chunk of ``later_chunk_len`` tokens after another), block size 2."""
    rows = [(5, 4, [0, 1, 2]), (3, 2, [3, 4])]
    first_block = 5
    for query_len in [chunk_len] + ([] if later_chunk_len is None else [later_chunk_len]):
        num_blocks = -(-(4 + query_len) // 2)
        rows.append((4 + query_len, 4, list(range(first_block, first_block + num_blocks))))
        first_block += num_blocks
    seqs = []
    for length, computed, table in rows:
        seq = Sequence(request_id="r", index=0, token_ids=list(range(length)), num_prompt_tokens=length,
                       params=SamplingParams(), max_tokens=4, arrival_time=0.0)
        seq.num_computed_tokens, seq.block_table = computed, table
        seqs.append(seq)
    num_new = [1, 1] + [length - computed for length, computed, _ in rows[2:]]
    plan = build_step_plan(seqs, num_new, block_size=2, eos_token_ids=set()).plan
    return backend.build_metadata(plan, CPU)


def test_metadata_is_flat_varlen():
    metadata = step_metadata(TorchAttentionBackend())
    assert metadata.cu_seqlens_q.tolist() == [0, 1, 2, 5]
    assert metadata.seq_lens.tolist() == [5, 3, 7]
    assert (metadata.num_decode_tokens, metadata.max_query_len, metadata.max_seq_len) == (2, 3, 7)


def test_token_queries_give_each_query_of_a_short_row_its_causal_context():
    metadata = step_metadata(TorchAttentionBackend())
    queries = metadata.token_queries(3)
    assert queries.tokens == slice(0, 5) and queries.other_rows == []
    assert queries.context_lens.tolist() == [5, 3, 5, 6, 7]
    assert queries.block_tables[2:].tolist() == [[5, 6, 7, 8]] * 3
    decode_only = metadata.token_queries(2)
    assert decode_only.tokens == slice(0, 2) and decode_only.context_lens.tolist() == [5, 3]
    assert decode_only.other_rows == [2]


def test_token_queries_pass_over_a_long_row_between_short_ones():
    metadata = step_metadata(TorchAttentionBackend(), chunk_len=4, later_chunk_len=2)
    queries = metadata.token_queries(2)
    assert queries.tokens.tolist() == [0, 1, 6, 7] and queries.other_rows == [2]
    assert queries.context_lens.tolist() == [5, 3, 5, 6]
    assert queries.block_tables[2:].tolist() == [[9, 10, 11, 0]] * 2  # padded to the widest table


def run_layer(backend, metadata) -> torch.Tensor:
    torch.manual_seed(0)
    num_tokens = metadata.host_cu_seqlens_q[-1]
    layer = Attention(num_heads=4, num_kv_heads=2, head_dim=8, scale=0.3)
    layer.kv_cache = LayerKVCache(*torch.randn(2, 2 * (int(metadata.block_tables.max()) + 1), 2, 8).unbind(0))
    q, k, v = torch.randn(num_tokens, 4, 8), torch.randn(num_tokens, 2, 8), torch.randn(num_tokens, 2, 8)
    return backend.forward(q, k, v, layer.kv_cache, layer.scale, metadata)


class RecordingKernels:
    """Kernels that record each call's block tables, context lengths and block size, and return zeros."""

    calls: list[tuple[int, list[int], int]] = []

    @classmethod
    def paged_decode_attention(cls, q, k_cache, v_cache, block_tables, seq_lens, block_size, scale):
        cls.calls.append((block_tables.shape[0], seq_lens.tolist(), block_size))
        return torch.zeros_like(q)


def test_kernel_backend_takes_the_torch_path_until_the_kernels_load(monkeypatch):
    """Per call: without kernels it equals the torch backend; once they load, decode rows and a verification-sized
    row go through them, the row's queries each over its causal context."""
    monkeypatch.setattr(RecordingKernels, "calls", [])
    metadata = step_metadata(TorchAttentionBackend())
    expected = run_layer(TorchAttentionBackend(), metadata)
    monkeypatch.setattr(cpu_kernel_backend, "cpu_kernels", lambda: None)
    assert torch.equal(run_layer(CpuKernelAttentionBackend(), metadata), expected)
    monkeypatch.setattr(cpu_kernel_backend, "cpu_kernels", lambda: RecordingKernels)
    with_kernels = run_layer(CpuKernelAttentionBackend(), metadata)
    assert RecordingKernels.calls == [(5, [5, 3, 5, 6, 7], 2)]
    assert torch.equal(with_kernels, torch.zeros(5, 4, 8))


def test_kernel_backend_leaves_rows_longer_than_a_verification_to_torch_when_asked(monkeypatch):
    monkeypatch.setattr(RecordingKernels, "calls", [])
    chunk_len = cpu_kernel_backend.MAX_PER_QUERY_ROW_LEN + 1
    metadata = step_metadata(TorchAttentionBackend(), chunk_len)
    expected = run_layer(TorchAttentionBackend(), metadata)
    monkeypatch.setattr(cpu_kernel_backend, "cpu_kernels", lambda: RecordingKernels)
    with_kernels = run_layer(CpuKernelAttentionBackend(every_query_alone=False), metadata)
    assert RecordingKernels.calls == [(2, [5, 3], 2)]
    assert torch.equal(with_kernels[:2], torch.zeros(2, 4, 8)) and torch.equal(with_kernels[2:], expected[2:])


def test_kernel_backend_attends_every_query_of_a_long_row_alone_by_default(monkeypatch):
    """A prompt's queries go through the decode kernel too, each over its causal context, so a token's bits do
    not depend on the chunk it was prefilled in nor on what else the step holds."""
    monkeypatch.setattr(RecordingKernels, "calls", [])
    chunk_len = cpu_kernel_backend.MAX_PER_QUERY_ROW_LEN + 1
    metadata = step_metadata(TorchAttentionBackend(), chunk_len)
    monkeypatch.setattr(cpu_kernel_backend, "cpu_kernels", lambda: RecordingKernels)
    with_kernels = run_layer(CpuKernelAttentionBackend(), metadata)
    assert RecordingKernels.calls == [(2 + chunk_len, [5, 3, *range(5, 5 + chunk_len)], 2)]
    assert torch.equal(with_kernels, torch.zeros(2 + chunk_len, 4, 8))


@pytest.mark.parametrize("kv_format, kernel", [(INT8, "paged_decode_attention_int8"), (FP8_E4M3, None)],
                         ids=["int8", "fp8_e4m3"])
def test_the_kernel_backend_reads_int8_caches_in_place_and_fp8_ones_through_torch(monkeypatch, kv_format, kernel):
    calls = []

    class FakeKernels:
        @staticmethod
        def paged_decode_attention_int8(q, k_cache, v_cache, k_scales, v_scales, block_tables, seq_lens, block_size,
                                        scale):
            calls.append("paged_decode_attention_int8")
            assert k_cache.dtype == torch.int8 and k_scales.shape == k_cache.shape[:2]
            return torch.zeros_like(q)

    metadata = step_metadata(TorchAttentionBackend())
    layer = Attention(num_heads=4, num_kv_heads=2, head_dim=8, scale=0.3)
    scales = (torch.zeros(18, 2), torch.zeros(18, 2)) if kv_format.scaled else ()
    layer.kv_cache = LayerKVCache(torch.zeros(18, 2, 8, dtype=kv_format.storage_dtype),
                                  torch.zeros(18, 2, 8, dtype=kv_format.storage_dtype), kv_format, *scales)
    monkeypatch.setattr(cpu_kernel_backend, "cpu_kernels", lambda: FakeKernels)
    q, k, v = torch.randn(5, 8, 8).split([4, 2, 2], dim=1)
    CpuKernelAttentionBackend().forward(q, k, v, layer.kv_cache, layer.scale, metadata)
    assert calls == ([kernel] if kernel else [])
