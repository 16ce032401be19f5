"""The tools a kernel build runs: a C++ compiler and ninja, found on PATH or in this environment."""
from __future__ import annotations

import os
import shutil

from autoglm.kernels.kernel_spec import compiler


def put_ninja_on_path() -> None:
    """PyTorch runs ``ninja`` from PATH; the pip-installed one sits in an environment that may not be active."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


def toolchain_missing() -> str | None:
    """What the build needs and this machine lacks (a C++ compiler, ninja), or None."""
    put_ninja_on_path()
    missing = [tool for tool in (compiler(), "ninja") if shutil.which(tool) is None]
    return " and ".join(missing) or None
