"""Size and allocate the KV pool, and bind each attention layer to its slice of it."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.attention import Attention
from autoglm.attention.kv_cache_format import AUTO, SCALE_DTYPE, KVCacheFormat
from autoglm.attention.layer_kv_cache import LayerKVCache

logger = logging.getLogger(__name__)

# The CPU default when no budget is set: enough for every sequence's full context, capped.
DEFAULT_CPU_KV_BYTES = 2 * 1024**3
# On accelerators without a budget: this share of the memory still free after the weights.
DEFAULT_ACCELERATOR_FRACTION = 0.8


def attention_layers(model: nn.Module) -> list[Attention]:
    return [module for module in model.modules() if isinstance(module, Attention)]


def bytes_per_block(model: nn.Module, block_size: int, dtype: torch.dtype, kv_format: KVCacheFormat = AUTO) -> int:
    """K and V of ``block_size`` tokens across every layer, as ``kv_format`` stores them (scales included);
    under tensor parallelism of this rank's KV heads, which its attention layers hold."""
    return sum(2 * block_size * layer.num_kv_heads * kv_format.bytes_per_token_head(layer.head_dim, dtype)
               for layer in attention_layers(model))


def default_kv_bytes(free_device_bytes: int | None, full_need_bytes: int) -> int:
    """The pool size when ``kv_cache_memory`` is unset: never more than every sequence's full
    context needs (``full_need_bytes``), so several engines in one process can share a device."""
    if free_device_bytes is None:
        return min(DEFAULT_CPU_KV_BYTES, full_need_bytes)
    return min(int(free_device_bytes * DEFAULT_ACCELERATOR_FRACTION), full_need_bytes)


@dataclass
class KVPool:
    """Every layer's K and V ``[layers, 2, slots, kv_heads, head_dim]`` as stored, and their scales
    ``[layers, 2, slots, kv_heads]`` when the format has them."""

    values: torch.Tensor
    scales: torch.Tensor | None
    format: KVCacheFormat
    num_blocks: int
    block_size: int

    @property
    def num_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.values, self.scales) if t is not None)

    @property
    def bytes_per_token(self) -> float:
        return self.num_bytes / (self.num_blocks * self.block_size)


def allocate_kv_cache(model: nn.Module, num_blocks: int, block_size: int, dtype: torch.dtype,
                      device: torch.device, kv_format: KVCacheFormat = AUTO) -> KVPool:
    """One zeroed pool; each layer gets views of its part.

    Zeroed rather than empty: padded decode slots are read (then masked), and masked
    garbage that happens to be NaN would still poison the attention output.
    """
    layers = attention_layers(model)
    first = layers[0]
    slots = num_blocks * block_size
    values = torch.zeros(len(layers), 2, slots, first.num_kv_heads, first.head_dim,
                         dtype=kv_format.storage(dtype), device=device)
    scales = (torch.zeros(len(layers), 2, slots, first.num_kv_heads, dtype=SCALE_DTYPE, device=device)
              if kv_format.scaled else None)
    for index, layer in enumerate(layers):
        layer_scales = (None, None) if scales is None else (scales[index, 0], scales[index, 1])
        layer.kv_cache = LayerKVCache(values[index, 0], values[index, 1], kv_format, *layer_scales)
    pool = KVPool(values, scales, kv_format, num_blocks, block_size)
    logger.info("KV cache: %d blocks of %d tokens as %s (%.1f MiB, %.0f bytes per token)", num_blocks, block_size,
                kv_format.name if kv_format.storage_dtype else str(dtype).removeprefix("torch."),
                pool.num_bytes / 2**20, pool.bytes_per_token)
    return pool
