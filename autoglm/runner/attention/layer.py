"""The attention layer that model code calls; the KV cache tensors are bound by the runner."""
from __future__ import annotations

import torch
from torch import nn

from autoglm.runner.attention.metadata import get_attention_metadata
from autoglm.runner.attention import torch_backend


class Attention(nn.Module):
    """Scaled dot-product attention over the paged cache of one layer.

    ``k_cache`` and ``v_cache`` are ``[num_slots, num_kv_heads, head_dim]`` views that the
    runner assigns after it allocates the KV pool. Without metadata (a plain forward, as in
    tests of a model alone) the batch is treated as one causal sequence and nothing is cached.
    """

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, scale: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = scale
        self.k_cache = torch.empty(0)
        self.v_cache = torch.empty(0)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q: [T, H, D], k and v: [T, Hkv, D]; returns [T, H * D]."""
        metadata = get_attention_metadata()
        if metadata is None:
            out = torch_backend.sequence_attention(q, k, v, self.scale)
        else:
            out = torch_backend.paged_attention(q, k, v, self.k_cache, self.v_cache, metadata, self.scale)
        return out.reshape(q.shape[0], self.num_heads * self.head_dim)
