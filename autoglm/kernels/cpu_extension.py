"""Builds the compiled CPU kernels (``*.cpp`` beside this file) once per machine, or says why not.

PyTorch's extension builder compiles them with the machine's C++ compiler and ninja and
caches the result (``~/.cache/torch_extensions``), so only the first start on a machine pays
for the build (under a minute). Every caller has a plain-PyTorch path for when this returns
None: a CPU without AVX-512, or no toolchain.
"""
from __future__ import annotations

import logging
import os
import shutil
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from autoglm.platforms import cpu_has_flags

logger = logging.getLogger(__name__)

REQUIRED_CPU_FLAGS = ("avx512f", "avx512bw")
_SOURCES = ("bindings.cpp", "bf16_weight_linear.cpp", "paged_decode_attention.cpp")
_FLAGS = ["-O3", "-mavx512f", "-mavx512bw", "-fopenmp"]


@lru_cache(maxsize=1)
def load_cpu_kernels() -> ModuleType | None:
    """The built extension, or None (logged once) where this CPU or toolchain cannot run it."""
    if not cpu_has_flags(*REQUIRED_CPU_FLAGS):
        return None
    from torch.utils.cpp_extension import load

    _put_ninja_on_path()
    logger.info("loading the CPU kernels (built once per machine, then cached by PyTorch)")
    folder = Path(__file__).parent
    try:
        return load(name="autoglm_cpu_kernels", sources=[str(folder / name) for name in _SOURCES],
                    extra_cflags=_FLAGS, extra_ldflags=["-fopenmp"])
    except (OSError, RuntimeError, ImportError) as error:  # no compiler, no ninja, a failed build
        logger.warning("CPU kernels unavailable, using plain PyTorch instead: %s", error)
        return None


def _put_ninja_on_path() -> None:
    """PyTorch runs ``ninja`` from PATH; the pip-installed one sits in an environment that may not be active."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
