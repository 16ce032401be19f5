"""The compiled CPU kernels (``*.cpp`` beside this file): built once per torch version, never waited for.

``start_cpu_kernel_build`` imports them at start-up if they were built before, else builds them
in a child process (see ``background_build``) while the engine serves with plain PyTorch.
Callers ask ``cpu_kernels()`` on every call, so they switch to the kernels the moment they
load. It stays None on a CPU without AVX2 and FMA, without a compiler and ninja, or after a failed
build, and every caller has a plain-PyTorch path for that.
"""
from __future__ import annotations

import logging
import threading
from types import ModuleType

from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.cpu_kernel_sources import AVX512_FLAGS, cpu_kernel_spec
from autoglm.kernels.kernel_spec import kernel_cache_root
from autoglm.kernels.toolchain import toolchain_missing
from autoglm.platforms import cpu_has_flags, reported_cpu_flags

logger = logging.getLogger(__name__)

# The library builds for any x86-64 CPU with AVX2 and FMA (the portable linear kernel's needs);
# kernels needing more are compiled only on a CPU that reports it (cpu_kernel_sources.py).
REQUIRED_CPU_FLAGS = ("avx2", "fma")
ATTENTION_CPU_FLAGS = AVX512_FLAGS  # paged_decode_attention
CPU_KERNELS = cpu_kernel_spec(reported_cpu_flags() or frozenset())

_build: BackgroundBuild | None = None
_starting = threading.Lock()


def start_cpu_kernel_build() -> bool:
    """Make the kernels available without waiting for them; False where this machine cannot have them."""
    global _build
    with _starting:
        if _build is not None:
            return not _build.failed
        if not cpu_has_flags(*REQUIRED_CPU_FLAGS):
            return False
        missing = toolchain_missing()
        if missing is not None:
            logger.warning("the CPU kernels need %s on PATH; plain PyTorch runs instead", missing)
            return False
        _build = BackgroundBuild(CPU_KERNELS, kernel_cache_root())
        _build.start()
        return True


def cpu_kernels() -> ModuleType | None:
    """The kernels if they are loaded by now, else None (take the plain-PyTorch path); never waits."""
    return _build.module if _build is not None else None


def wait_for_cpu_kernels(timeout_s: float) -> ModuleType | None:
    """Start the kernels if needed and wait up to ``timeout_s`` for them, for callers that must measure them."""
    if not start_cpu_kernel_build():
        return None
    assert _build is not None
    return _build.wait(timeout_s)
