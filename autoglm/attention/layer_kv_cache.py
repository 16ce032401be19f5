"""One attention layer's part of the KV pool, and the only code that converts to and from its storage."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.attention.kv_cache_format import AUTO, KVCacheFormat


@dataclass
class LayerKVCache:
    """Keys and values ``[slots, kv_heads, head_dim]`` as the format stores them, and for a scaled
    format their scales ``[slots, kv_heads]`` (float32) beside them."""

    keys: torch.Tensor
    values: torch.Tensor
    format: KVCacheFormat = AUTO
    key_scales: torch.Tensor | None = None
    value_scales: torch.Tensor | None = None

    def write(self, slots: torch.Tensor, k: torch.Tensor,
              v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this step's ``k`` and ``v`` ``[T, kv_heads, head_dim]`` at ``slots``, quantized per token and
        head; returns them as reading them back gives them (the inputs themselves for ``auto``)."""
        read_back = []
        for cache, scales, new in ((self.keys, self.key_scales, k), (self.values, self.value_scales, v)):
            stored, new_scales = self.format.quantize(new)
            _copyable(cache).index_copy_(0, slots, _copyable(stored))
            if scales is not None:
                scales.index_copy_(0, slots, new_scales)
            read_back.append(self.format.dequantize(stored, new_scales, new.dtype))
        return read_back[0], read_back[1]

    def gather(self, slots: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values at ``slots`` (any shape ``[...]``) in ``dtype``: ``[..., kv_heads, head_dim]``."""
        return (self._read(self.keys, self.key_scales, slots, dtype),
                self._read(self.values, self.value_scales, slots, dtype))

    def _read(self, cache: torch.Tensor, scales: torch.Tensor | None, slots: torch.Tensor,
              dtype: torch.dtype) -> torch.Tensor:
        return self.format.dequantize(cache[slots], None if scales is None else scales[slots], dtype)


def _copyable(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, viewed as bytes when it is float8: PyTorch's CPU ``index_copy_`` has no float8 kernel."""
    is_float8 = tensor.dtype.is_floating_point and tensor.dtype.itemsize == 1
    return tensor.view(torch.uint8) if is_float8 else tensor
