"""Portable attention in plain PyTorch: runs on the CPU and on any torch device."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autoglm.attention.backend import AttentionBackend
from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata
from autoglm.attention.sequence_attention import sequence_attention


class TorchAttentionBackend(AttentionBackend):
    """Decode rows as one batched gather-then-attend; each prefill row as one SDPA call."""

    name = "torch"

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: LayerKVCache, scale: float,
                metadata: AttentionMetadata) -> torch.Tensor:
        # Attend to this step's K/V as later steps read them back: with a compact cache a token's output
        # then does not depend on whether its prefix was cached or computed now (vLLM, too, reads every
        # key from the cache).
        k, v = kv_cache.write(metadata.slot_mapping, k, v)
        out = torch.empty_like(q)
        num_decodes = metadata.num_decode_tokens
        if num_decodes:
            out[:num_decodes] = self.decode(q[:num_decodes], kv_cache, metadata, scale)
        for row in range(num_decodes, metadata.num_rows):
            self.attend_row(out, q, k, v, kv_cache, metadata, row, scale)
        return out

    def attend_row(self, out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: LayerKVCache,
                   metadata: AttentionMetadata, row: int, scale: float) -> None:
        """Row ``row``'s queries together, causally, over its cached prefix (if any) and this step's K/V;
        written into ``out``."""
        starts = metadata.host_cu_seqlens_q
        rows = slice(starts[row], starts[row + 1])
        if metadata.host_seq_lens[row] == rows.stop - rows.start:  # nothing cached before this chunk
            out[rows] = sequence_attention(q[rows], k[rows], v[rows], scale)
        else:
            slots, mask = metadata.prefix_context(row)
            keys, values = cache.gather(slots, q.dtype)
            out[rows] = sequence_attention(q[rows], keys, values, scale, mask)

    def decode(self, q: torch.Tensor, cache: LayerKVCache, metadata: AttentionMetadata, scale: float) -> torch.Tensor:
        """One query per row over its whole cached context: ``[B, H, D]`` in and out."""
        slots, mask = metadata.padded_decode_context()
        keys, values = (x.transpose(1, 2) for x in cache.gather(slots, q.dtype))  # [B, Hkv, L, D]
        attended = F.scaled_dot_product_attention(
            q.unsqueeze(2), keys, values, attn_mask=mask, scale=scale, enable_gqa=True  # queries [B, H, 1, D]
        )
        return attended.squeeze(2)

