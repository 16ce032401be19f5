"""The compiled CPU kernels (``*.cpp`` beside this file): built once per torch version, switched to at a step
boundary.

``start_cpu_kernel_build`` imports them at start-up if they were built before, else builds them in a
child process (see ``background_build``) while the engine serves with plain PyTorch. Built is not yet in
use: ``cpu_kernels()``, which the model's layers ask on every call, answers what the running step was
given (``cpu_kernels_in_use``). The engine decides that per step and switches once no request runs
(``engine.kernel_switch``), so a request runs entirely on one path; a tensor-parallel worker takes its
plan's word. Outside steps they are in use once found at start-up or waited for
(``wait_for_cpu_kernels``: the offline ``LLM`` before its first step and the benchmarks, saying so on the
console). They stay None on a CPU without AVX2 and FMA, without a compiler and ninja, or after a failed
build, and every caller has a plain-PyTorch path for that.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from types import ModuleType

from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.build_estimate import estimated_build_seconds
from autoglm.kernels.cpu_kernel_sources import AVX512_FLAGS, cpu_kernel_spec
from autoglm.kernels.kernel_spec import kernel_cache_root
from autoglm.kernels.toolchain import toolchain_missing
from autoglm.platforms import cpu_has_flags, reported_cpu_flags
from autoglm.progress import announce

logger = logging.getLogger(__name__)

# The library builds for any x86-64 CPU with AVX2 and FMA (the portable linear kernel's needs);
# kernels needing more are compiled only on a CPU that reports it (cpu_kernel_sources.py).
REQUIRED_CPU_FLAGS = ("avx2", "fma")
ATTENTION_CPU_FLAGS = AVX512_FLAGS  # paged_decode_attention
CPU_KERNELS = cpu_kernel_spec(reported_cpu_flags() or frozenset())
# A bound on any wait, to catch a hang (a build itself waits up to background_build.LOCK_TIMEOUT_S for another's).
WAIT_BOUND_S = 1800.0

_build: BackgroundBuild | None = None
_unavailable: str | None = None  # why this machine runs without them, once known
_building_since: float | None = None  # monotonic time the background build started
_starting = threading.Lock()
_outside_steps: ModuleType | None = None  # in use outside steps: found at start-up, or waited for
_BETWEEN_STEPS = object()


class _StepLibrary(threading.local):
    """What the step running on this thread was given; a class default, so a read between steps raises nothing."""

    library: object = _BETWEEN_STEPS


_step = _StepLibrary()


def start_cpu_kernel_build() -> bool:
    """Make the kernels available without waiting for them; False where this machine cannot have them."""
    global _build, _unavailable, _building_since, _outside_steps
    with _starting:
        if _build is not None:
            return not _build.failed
        if _unavailable is not None:
            return False
        if not cpu_has_flags(*REQUIRED_CPU_FLAGS):
            _unavailable = "this CPU lacks AVX2 or FMA"
            return False
        missing = toolchain_missing()
        if missing is not None:
            logger.warning("the CPU kernels need %s on PATH; plain PyTorch runs instead", missing)
            _unavailable = f"no {missing} on PATH"
            return False
        build = BackgroundBuild(CPU_KERNELS, kernel_cache_root())
        build.start()
        if build.module is not None:  # built before: no step ever runs without them
            _outside_steps = build.module
        elif not build.failed:
            _building_since = time.monotonic()
        _build = build
        return True


def cpu_kernels() -> ModuleType | None:
    """The kernels if the running step (outside steps: the process) uses them, else None: take the
    plain-PyTorch path. Two reads, as every layer asks on every call."""
    library = _step.library
    return _outside_steps if library is _BETWEEN_STEPS else library


@contextlib.contextmanager
def cpu_kernels_in_use(use: bool) -> Iterator[None]:
    """Within this, on this thread, ``cpu_kernels()`` is the library if ``use``, else None: one step's path.
    A tensor-parallel worker told to use a library it is still loading waits for it."""
    before = _step.library
    _step.library = _loaded(wait=True) if use else None
    try:
        yield
    finally:
        _step.library = before


def cpu_kernels_built() -> bool:
    """Whether the library has loaded in this process (an engine may switch to it)."""
    return _loaded(wait=False) is not None


def wait_for_cpu_kernels(timeout_s: float = WAIT_BOUND_S) -> ModuleType | None:
    """Start the kernels if needed and wait up to ``timeout_s`` for them, saying so on the console with the
    estimate, and when they are built; from then on they are in use outside steps too. For callers that
    wait before their first step (the offline ``LLM``) or that measure the kernels."""
    global _outside_steps
    if not start_cpu_kernel_build():
        return None
    assert _build is not None
    if _build.module is None and not _build.failed:
        estimate = estimated_build_seconds(CPU_KERNELS, kernel_cache_root())
        announce(logger, f"waiting for the CPU kernels to build (about {estimate:.0f} s on this machine, "
                         f"once per torch version)")
        started = time.monotonic()
        if _build.wait(timeout_s) is not None:
            announce(logger, f"the CPU kernels are built ({time.monotonic() - started:.0f} s); using them")
        elif not _build.failed:
            logger.warning("the CPU kernels were not built after %.0f s; plain PyTorch runs instead", timeout_s)
    _outside_steps = _build.module
    return _outside_steps


def cpu_kernel_status() -> str | None:
    """Where the kernels stand, in words (``/health``): ``building (about 70 s, started 12 s ago)``, ``ready``
    or ``unavailable: <why>``; None where nothing asked for them (an engine on an accelerator)."""
    if _unavailable is not None:
        return f"unavailable: {_unavailable}"
    if _build is None:
        return None
    if _build.module is not None:
        return "ready"
    if _build.failed:
        return "unavailable: the build failed or its library did not load (see the log)"
    estimate = estimated_build_seconds(CPU_KERNELS, kernel_cache_root())
    elapsed = time.monotonic() - (_building_since if _building_since is not None else time.monotonic())
    return f"building (about {estimate:.0f} s, started {elapsed:.0f} s ago)"


def _loaded(wait: bool) -> ModuleType | None:
    """The library if it has loaded (waiting for a build under way if ``wait``), else None."""
    if _build is None:
        return None
    return _build.wait(WAIT_BOUND_S) if wait and _build.module is None else _build.module
