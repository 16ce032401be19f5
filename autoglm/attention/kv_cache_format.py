"""How the KV cache stores keys and values (the ``kv_cache_dtype`` setting).

``auto`` keeps them in the compute dtype. ``int8`` stores each token's K (and V) of each KV head
as int8 with one symmetric float32 scale, the head's largest magnitude over 127: a float32
scale adds no rounding of its own to the int8 step, costs 4 bytes per ``head_dim`` bytes, and
is what the CPU decode kernel reads whatever the compute dtype. ``fp8_e4m3`` and ``fp8_e5m2``
cast to PyTorch's float8 types unscaled, as vLLM does by default (its per-tensor scales are 1.0
unless a checkpoint carries calibrated ones), saturating at the type's largest finite value as
vLLM's conversion does rather than overflowing to NaN.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

SCALE_DTYPE = torch.float32
INT8_LIMIT = 127  # symmetric: -128 is never used, so negation is exact


@dataclass(frozen=True)
class KVCacheFormat:
    """One ``kv_cache_dtype``: what a cache slot holds per KV head and how it converts."""

    name: str
    storage_dtype: torch.dtype | None  # None: the compute dtype, stored as computed
    scaled: bool = False  # a per-(token, KV head) scale is stored beside the values

    def storage(self, compute_dtype: torch.dtype) -> torch.dtype:
        return self.storage_dtype or compute_dtype

    def bytes_per_token_head(self, head_dim: int, compute_dtype: torch.dtype) -> int:
        """Bytes one token's K (or V) of one KV head takes, its scale included."""
        scale_bytes = SCALE_DTYPE.itemsize if self.scaled else 0
        return head_dim * self.storage(compute_dtype).itemsize + scale_bytes

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` ``[..., head_dim]`` as stored, and its scales ``[...]`` (None when unscaled)."""
        if self.storage_dtype is None:
            return x, None
        if self.scaled:
            wide = x.float()
            scales = (wide.abs().amax(dim=-1) / INT8_LIMIT).clamp_min(torch.finfo(SCALE_DTYPE).tiny)
            stored = torch.round(wide / scales.unsqueeze(-1)).clamp_(-INT8_LIMIT, INT8_LIMIT)
            return stored.to(self.storage_dtype), scales
        largest = torch.finfo(self.storage_dtype).max
        return x.float().clamp(-largest, largest).to(self.storage_dtype), None

    def dequantize(self, stored: torch.Tensor, scales: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
        """Values in ``dtype`` from what :meth:`quantize` stored."""
        if scales is None:
            return stored.to(dtype)
        return (stored.float() * scales.unsqueeze(-1)).to(dtype)


AUTO = KVCacheFormat("auto", None)
INT8 = KVCacheFormat("int8", torch.int8, scaled=True)
FP8_E4M3 = KVCacheFormat("fp8_e4m3", torch.float8_e4m3fn)
FP8_E5M2 = KVCacheFormat("fp8_e5m2", torch.float8_e5m2)
KV_CACHE_FORMATS = {kv_format.name: kv_format for kv_format in (AUTO, INT8, FP8_E4M3, FP8_E5M2)}


def kv_cache_format(name: str) -> KVCacheFormat:
    if name not in KV_CACHE_FORMATS:
        raise ValueError(f"unknown kv_cache_dtype {name!r}; allowed: {', '.join(KV_CACHE_FORMATS)}")
    return KV_CACHE_FORMATS[name]


def converts_on(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether PyTorch on ``device`` can convert float32 to ``dtype`` and back (float8 cannot on every device)."""
    try:
        torch.ones(2, device=device).to(dtype).float().sum().item()
    except (RuntimeError, TypeError):
        return False
    return True


def check_kv_cache_format(kv_format: KVCacheFormat, device: torch.device) -> None:
    """Refuse a format whose storage type this device cannot convert to, naming what it can use."""
    if kv_format.storage_dtype is None or converts_on(device, kv_format.storage_dtype):
        return
    usable = [name for name, other in KV_CACHE_FORMATS.items()
              if other.storage_dtype is None or converts_on(device, other.storage_dtype)]
    raise ValueError(
        f"kv_cache_dtype {kv_format.name!r} needs {str(kv_format.storage_dtype).removeprefix('torch.')} "
        f"conversions, which PyTorch does not offer on {device}; allowed here: {', '.join(usable)}"
    )
