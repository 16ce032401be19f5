"""The attention layer that model code calls; its KV cache and forward context are bound by the runner."""
from __future__ import annotations

import torch
from torch import nn

from autoglm.attention.forward_context import ForwardContext
from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.sequence_attention import sequence_attention


class Attention(nn.Module):
    """Scaled dot-product attention over the paged cache of one layer.

    ``kv_cache`` holds views of this layer's part of the pool, and ``forward_context`` is the
    owning runner's context, both set when a runner takes the model.
    Outside a step (a plain forward, as in tests of a model alone) the batch is treated as one
    causal sequence and nothing is cached.
    """

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, scale: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = scale
        self.kv_cache = LayerKVCache(torch.empty(0), torch.empty(0))
        self.forward_context: ForwardContext | None = None

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q: [T, H, D], k and v: [T, Hkv, D]; returns [T, H * D]."""
        context = self.forward_context
        if context is None or context.metadata is None:
            out = sequence_attention(q, k, v, self.scale)
        else:
            out = context.backend.forward(q, k, v, self.kv_cache, self.scale, context.metadata)
        return out.reshape(q.shape[0], self.num_heads * self.head_dim)
