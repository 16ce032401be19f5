"""Size and allocate the KV pool, and bind each attention layer to its slice of it."""
from __future__ import annotations

import logging

import torch
from torch import nn

from autoglm.attention import Attention

logger = logging.getLogger(__name__)

# The CPU default when no budget is set: enough for every sequence's full context, capped.
DEFAULT_CPU_KV_BYTES = 2 * 1024**3
# On accelerators without a budget: this share of the memory still free after the weights.
DEFAULT_ACCELERATOR_FRACTION = 0.8


def attention_layers(model: nn.Module) -> list[Attention]:
    return [module for module in model.modules() if isinstance(module, Attention)]


def bytes_per_block(model: nn.Module, block_size: int, dtype: torch.dtype) -> int:
    """K and V of ``block_size`` tokens across every layer."""
    element = torch.empty(0, dtype=dtype).element_size()
    return sum(2 * block_size * layer.num_kv_heads * layer.head_dim * element for layer in attention_layers(model))


def default_kv_bytes(free_device_bytes: int | None, full_need_bytes: int) -> int:
    """The pool size when ``kv_cache_memory`` is unset: never more than every sequence's full
    context needs (``full_need_bytes``), so several engines in one process can share a device."""
    if free_device_bytes is None:
        return min(DEFAULT_CPU_KV_BYTES, full_need_bytes)
    return min(int(free_device_bytes * DEFAULT_ACCELERATOR_FRACTION), full_need_bytes)


def allocate_kv_cache(model: nn.Module, num_blocks: int, block_size: int, dtype: torch.dtype,
                      device: torch.device) -> torch.Tensor:
    """One zeroed tensor [layers, 2, slots, kv_heads, head_dim]; each layer gets views of its part.

    Zeroed rather than empty: padded decode slots are read (then masked), and masked
    garbage that happens to be NaN would still poison the attention output.
    """
    layers = attention_layers(model)
    first = layers[0]
    cache = torch.zeros(len(layers), 2, num_blocks * block_size, first.num_kv_heads, first.head_dim,
                        dtype=dtype, device=device)
    for layer, layer_cache in zip(layers, cache):
        layer.k_cache, layer.v_cache = layer_cache[0], layer_cache[1]
    logger.info("KV cache: %d blocks of %d tokens (%.1f MiB)", num_blocks, block_size,
                cache.numel() * cache.element_size() / 2**20)
    return cache
