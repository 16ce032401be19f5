"""How long a first build of a kernel library takes on this machine (a fixed figure until it is measured)."""
from __future__ import annotations

from pathlib import Path

from autoglm.kernels.kernel_spec import KernelSpec

PLACEHOLDER_BUILD_S = 180.0


def estimated_build_seconds(spec: KernelSpec, root: Path) -> float:
    return PLACEHOLDER_BUILD_S
