"""Host values onto the device without waiting for it.

``torch.tensor(values, device="cuda")`` copies synchronously, and a synchronous copy waits for every
kernel already queued: under async scheduling that would make the next step's preparation wait for
the step still running. A non-blocking copy is asynchronous for certain only from pinned memory (from
pageable memory the CUDA driver may synchronise with the stream to stage it), so on CUDA host values
go through a pinned buffer from PyTorch's caching host allocator, which keeps the buffer until the
copy has run.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def staged_for(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` (on the host) ready for a non-blocking copy to ``device``: a pinned copy on CUDA."""
    return tensor.pin_memory() if device.type == "cuda" else tensor


def tensor_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``, its copy queued behind the device's work rather than waiting for it."""
    return staged_for(tensor, device).to(device, non_blocking=True)


def to_device(values: Sequence[int] | Sequence[float] | Sequence[bool], device: torch.device,
              dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values`` as a tensor on ``device``, queued behind the device's work rather than waiting for it."""
    return tensor_to_device(torch.tensor(values, dtype=dtype), device)
