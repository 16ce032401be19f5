"""Device choice and memory figures, so the rest of the code never asks torch directly."""
from __future__ import annotations

import logging
import os
import platform
from functools import lru_cache
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

# Names CPU flags the engine treats as absent, so a machine with bfloat16 units can run (and test)
# the paths of one without: e.g. "avx512_bf16,amx_bf16". oneDNN reads its own ONEDNN_MAX_CPU_ISA.
CPU_DISABLE_FLAGS_ENV = "AUTOGLM_CPU_DISABLE_FLAGS"

# CPU flags (Linux /proc/cpuinfo) of native matrix instructions for each half-precision dtype.
_HALF_MATMUL_FLAGS = {
    torch.bfloat16: ("avx512_bf16", "amx_bf16"),
    torch.float16: ("avx512_fp16", "amx_fp16"),
}


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


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a wall-clock reading covers it; nothing to wait for on the CPU."""
    if device.type in ("cuda", "xpu"):
        getattr(torch, device.type).synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def device_memory(device: torch.device) -> tuple[int, int] | None:
    """(free, total) bytes of an accelerator; None on the CPU, where the budget is set in bytes."""
    if device.type in ("cuda", "xpu"):
        return getattr(torch, device.type).mem_get_info(device)
    return None


@lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str] | None:
    """The CPU's flags less those named in ``AUTOGLM_CPU_DISABLE_FLAGS``; None where unknown."""
    reported = reported_cpu_flags()
    disabled = disabled_cpu_flags()
    if reported is None or not disabled:
        return reported
    logger.warning("%s: treating this CPU as lacking %s (oneDNN follows only if ONEDNN_MAX_CPU_ISA was set "
                   "before start, e.g. AVX512_CORE)", CPU_DISABLE_FLAGS_ENV, ", ".join(sorted(disabled)))
    return reported - disabled


def disabled_cpu_flags() -> frozenset[str]:
    """The flags ``AUTOGLM_CPU_DISABLE_FLAGS`` names: the engine runs as if the CPU lacked them."""
    return frozenset(filter(None, os.environ.get(CPU_DISABLE_FLAGS_ENV, "").replace(",", " ").split()))


def cpu_model() -> str:
    """The CPU's marketing name, as Linux reports it; the platform's guess elsewhere."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    return platform.processor() or "unknown"


def reported_cpu_flags() -> frozenset[str] | None:
    """The flags the CPU itself reports, whatever ``AUTOGLM_CPU_DISABLE_FLAGS`` hides; None where unknown."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return None
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return None


def cpu_has_flags(*names: str) -> bool:
    """Whether this CPU reports every named instruction-set flag (False where it cannot tell)."""
    flags = _cpu_flags()
    return flags is not None and all(name in flags for name in names)


def cpu_has_native_matmul(dtype: torch.dtype) -> bool:
    """Whether this CPU multiplies ``dtype`` matrices in hardware; unknown CPUs are assumed to."""
    flags = _cpu_flags()
    if dtype not in _HALF_MATMUL_FLAGS or flags is None:
        return True
    return any(flag in flags for flag in _HALF_MATMUL_FLAGS[dtype])


def compute_dtype(dtype: torch.dtype, device: torch.device, upcast_half_on_cpu: bool) -> torch.dtype:
    """The dtype weights and KV are kept in: ``dtype``, or float32 where the CPU would emulate it.

    Without bf16/fp16 instructions PyTorch emulates half-precision matmuls, 2-4x slower than
    float32 on the same CPU, so computing in float32 is the faster way to run such a model.
    """
    if upcast_half_on_cpu and device.type == "cpu" and not cpu_has_native_matmul(dtype):
        return torch.float32
    return dtype
