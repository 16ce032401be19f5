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
from pathlib import Path
from types import ModuleType

from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.kernel_spec import KernelSpec, kernel_cache_root
from autoglm.kernels.toolchain import toolchain_missing
from autoglm.platforms import cpu_has_flags

logger = logging.getLogger(__name__)

# The library builds for any x86-64 CPU with AVX2 and FMA (the portable linear kernel's needs);
# kernels needing more compile for it alone and are called only where the CPU has it.
REQUIRED_CPU_FLAGS = ("avx2", "fma")
ATTENTION_CPU_FLAGS = ("avx512f", "avx512bw")  # paged_decode_attention
_FOLDER = Path(__file__).parent
CPU_KERNELS = KernelSpec(
    name="autoglm_cpu_kernels",
    sources=tuple(str(_FOLDER / name) for name in (
        "bindings.cpp", "bf16_weight_linear.cpp", "bf16_weight_linear_avx512.cpp", "bf16_weight_linear_avx2.cpp",
        "bf16_dot_linear.cpp", "paged_decode_attention.cpp",
        "fused_elementwise.cpp")),
    headers=(str(_FOLDER / "cpu_kernels.h"), str(_FOLDER / "bf16_weight_tiles.h")),
    cflags=("-O3", "-fopenmp"),
    ldflags=("-fopenmp",),
)

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
