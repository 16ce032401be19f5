"""Host values onto the device without waiting for it.

``torch.tensor(values, device="cuda")`` copies synchronously, and a synchronous copy waits for every
kernel already queued: under async scheduling that would make the next step's preparation wait for
the step still running. A pageable host tensor copied with ``non_blocking`` is staged at once instead.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def to_device(values: Sequence[int] | Sequence[float] | Sequence[bool], device: torch.device,
              dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values`` as a tensor on ``device``, queued behind the device's work rather than waiting for it."""
    return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)
