"""Attention on GPUs through the Triton paged-attention kernel: K/V read in place, one launch per kind of row
(two for decode rows split over partitions of their keys).

Nothing in a step's attention depends on host values that change from step to step (context
lengths are read by the kernel from ``seq_lens``, and whether decode rows are split is read from
shapes), so a decode step runs unchanged under CUDA graph capture.
"""
from __future__ import annotations

import torch

from autoglm.attention.backend import AttentionBackend
from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.triton_paged_attention import paged_attention


class TritonAttentionBackend(AttentionBackend):
    """Writes the step's K/V into the cache, then attends every row over what the cache holds."""

    name = "triton"
    supports_graph_capture = True

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: LayerKVCache, scale: float,
                metadata: AttentionMetadata) -> torch.Tensor:
        kv_cache.write(metadata.slot_mapping, k, v)
        return paged_attention(q if q.stride(-1) == 1 else q.contiguous(), kv_cache, metadata, scale)
