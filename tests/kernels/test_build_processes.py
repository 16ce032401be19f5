"""No compiler outlives the process that started the build: killed with -9, or exiting through terminate(), or
whichever thread of the build child the kernel hands the stop signal to.

Each test starts a real build of the CPU kernels into its own cache, waits until a compiler of
it runs, ends the build's starter, and then finds no process left working in the build folder.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.cpu_extension import CPU_KERNELS
from autoglm.kernels.toolchain import toolchain_missing
from tests.kernels.test_kernel_build import WITH_AUTOGLM, is_gone, wait_until

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(toolchain_missing() is not None or not Path("/proc/self/cwd").exists(),
                                 reason="needs a C++ toolchain and Linux /proc")]
ENDED_WITHIN_S = 5.0


def build_processes(root: Path) -> list[str]:
    """'pid name' of each live process working in a folder under ``root`` (ninja runs its compilers there)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")).is_relative_to(root):
                found.append(f"{proc.name} {(proc / 'comm').read_text().strip()}")
        except OSError:  # ended while listed, or a zombie
            continue
    return found


def compiling(root: Path) -> bool:
    return any(line.endswith(" cc1plus") for line in build_processes(root))


def none_left_within_bound(root: Path) -> list[str]:
    """The build's processes still there once ENDED_WITHIN_S has passed, or none as soon as they are gone."""
    deadline = time.monotonic() + ENDED_WITHIN_S
    while (left := build_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


_PARENT = """
import sys, threading
from pathlib import Path
from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.cpu_extension import CPU_KERNELS
build = BackgroundBuild(CPU_KERNELS, Path(sys.argv[1]))
build.start()
print(build.child_pid, flush=True)
threading.Event().wait()
"""


def test_killing_the_starter_with_sigkill_ends_every_compiler_of_its_build(tmp_path):
    root = tmp_path / "cache"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(root)], stdout=subprocess.PIPE, text=True,
                              env=WITH_AUTOGLM)
    try:
        child = int(parent.stdout.readline())
        wait_until(lambda: compiling(root), "a compiler of the build runs")
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert none_left_within_bound(root) == []
    wait_until(lambda: is_gone(child), "the build child ended")
    assert not CPU_KERNELS.library(root).exists()


def build_compiling(root: Path) -> BackgroundBuild:
    """A build of the CPU kernels into ``root``, once a compiler of it runs (ended if none ever does)."""
    build = BackgroundBuild(CPU_KERNELS, root)
    build.start()
    try:
        wait_until(lambda: compiling(root), "a compiler of the build runs")
    except BaseException:
        build.terminate()
        raise
    return build


def test_terminate_at_exit_ends_every_compiler_of_the_build(tmp_path):
    root = tmp_path / "cache"
    build = build_compiling(root)
    build.terminate()  # what the exit handler runs
    assert none_left_within_bound(root) == []
    assert is_gone(build.child_pid) and build.wait(0) is None


def test_a_stop_signal_handed_to_a_thread_other_than_the_main_one_ends_the_build(tmp_path):
    """Python runs handlers on the main thread only; one blocked until the compiler prints would never run it."""
    root = tmp_path / "cache"
    build = build_compiling(root)
    try:
        child = build.child_pid
        others = sorted(int(task.name) for task in Path(f"/proc/{child}/task").iterdir() if int(task.name) != child)
        assert others, "the build child runs the build on a thread besides the main one"
        tgkill = ctypes.CDLL(None, use_errno=True).tgkill
        assert any(tgkill(child, thread, signal.SIGTERM) == 0 for thread in reversed(others)), "no thread took it"
        assert none_left_within_bound(root) == []
        wait_until(lambda: is_gone(child), "the build child ended")
    finally:
        build.terminate()
