"""How long a kernel build takes on this machine: its last build, as measured, else a measured figure scaled.

Every successful build records its wall time and the CPUs it had beside the cache, so the
estimate a start-up prints is this machine's own. Before any build, it is the time measured
once on a reference machine, scaled to this one's CPUs: fewer CPUs take proportionally longer,
more do not help (one file, the Python bindings, takes most of the build by itself).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from autoglm.kernels.kernel_spec import KernelSpec

# A first build of autoglm_cpu_kernels (every kernel file), measured on an AMD EPYC (Zen 4, AVX-512)
# with 2 cores, idle (load average 0.5): 26 s, most of it bindings.cpp (see docs/CPU_KERNELS.md).
REFERENCE_BUILD_S = 26.0
REFERENCE_CPUS = 2


@dataclass(frozen=True)
class MeasuredBuild:
    seconds: float
    cpus: int


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), which a build's compilers share."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def record_build_seconds(spec: KernelSpec, root: Path, seconds: float) -> None:
    """Remember that building ``spec`` took ``seconds`` here, replacing the figure before."""
    path = _record_path(spec, root)
    staging = path.with_name(f"{path.name}.{os.getpid()}")
    staging.write_text(json.dumps(asdict(MeasuredBuild(seconds, usable_cpus()))))
    staging.replace(path)  # a reader sees the old figure or the new one, never half of one


def estimated_build_seconds(spec: KernelSpec, root: Path) -> float:
    """This machine's last measured build of ``spec``, else the reference build; scaled to the CPUs here."""
    measured = _last_build(spec, root) or MeasuredBuild(REFERENCE_BUILD_S, REFERENCE_CPUS)
    return measured.seconds * max(1.0, measured.cpus / usable_cpus())


def _last_build(spec: KernelSpec, root: Path) -> MeasuredBuild | None:
    try:
        return MeasuredBuild(**json.loads(_record_path(spec, root).read_text()))
    except (OSError, ValueError, TypeError):  # none yet, or unreadable: the reference stands in
        return None


def _record_path(spec: KernelSpec, root: Path) -> Path:
    """One record per library name: a new revision of the sources takes about as long as the last."""
    return root / f"{spec.name}.build-seconds.json"
