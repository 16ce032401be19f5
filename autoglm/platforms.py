"""Device choice and memory figures, so the rest of the code never asks torch directly."""
from __future__ import annotations

import torch


def _accelerator_available(kind: str) -> bool:
    backend = getattr(torch, kind, None)
    if kind == "mps":
        return torch.backends.mps.is_available()
    return backend is not None and backend.is_available()


def resolve_device(name: str) -> torch.device:
    """``auto`` picks the accelerator PyTorch sees (CUDA/ROCm, XPU, MPS), else the CPU."""
    if name == "auto":
        for kind in ("cuda", "xpu", "mps"):
            if _accelerator_available(kind):
                return torch.device(kind)
        return torch.device("cpu")
    device = torch.device(name)
    if device.type != "cpu" and not _accelerator_available(device.type):
        raise ValueError(f"device '{name}' is not available on this machine; use 'auto' or 'cpu'")
    if device.type in ("cuda", "xpu") and device.index is not None:
        count = getattr(torch, device.type).device_count()
        if device.index >= count:
            raise ValueError(f"device '{name}' does not exist: this machine has {count} {device.type} device(s)")
    return device


def device_memory(device: torch.device) -> tuple[int, int] | None:
    """(free, total) bytes of an accelerator; None on the CPU, where the budget is set in bytes."""
    if device.type in ("cuda", "xpu"):
        return getattr(torch, device.type).mem_get_info(device)
    return None
