"""The kernel build machinery on a tiny fake library: cache keys, the build lock, the build child."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autoglm.kernels import kernel_spec
from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.build_lock import LockTimeout, build_lock, lock_holder
from autoglm.kernels.build_worker import PARTIAL_MARK
from tests.kernels.fake_kernels import fake_spec, make_quick

HANG_S = 120  # loose bounds that only catch a hang
WITH_AUTOGLM = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def is_gone(pid: int) -> bool:
    """Ended: no such process, or a zombie nobody has reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


# ---- the cache key -------------------------------------------------------------------
def test_the_key_follows_source_contents_not_their_folder(tmp_path):
    spec = fake_spec(tmp_path / "checkout_a")
    assert fake_spec(tmp_path / "checkout_b").key() == spec.key()  # another checkout shares the build
    assert fake_spec(tmp_path / "checkout_b", answer=7).key() != spec.key()


def test_the_key_follows_the_torch_build_and_the_flags(tmp_path, monkeypatch):
    spec = fake_spec(tmp_path)
    key = spec.key()
    assert replace(spec, cflags=("-O2",)).key() != key
    monkeypatch.setattr(torch, "__version__", "0.0.1+other")
    kernel_spec.build_environment.cache_clear()
    try:
        assert spec.key() != key
    finally:
        monkeypatch.undo()
        kernel_spec.build_environment.cache_clear()
    assert spec.key() == key


def test_the_cache_root_is_overridable_and_defaults_under_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(kernel_spec.CACHE_ENV, str(tmp_path))
    assert kernel_spec.kernel_cache_root() == tmp_path
    monkeypatch.delenv(kernel_spec.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_spec.kernel_cache_root() == tmp_path / "xdg" / "autoglm" / "kernels"


# ---- the lock ------------------------------------------------------------------------
def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path):
    path = tmp_path / "build.lock"
    path.write_text(f"{dead_pid()}\n")
    with build_lock(path, timeout_s=0):
        assert lock_holder(path) == os.getpid()


def test_a_live_holder_is_waited_for_within_the_bound(tmp_path, caplog):
    path = tmp_path / "build.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom autoglm.kernels.build_lock import "
         "build_lock\nwith build_lock(Path(sys.argv[1]), 10):\n    print('held', flush=True)\n    time.sleep(600)",
         str(path)], stdout=subprocess.PIPE, text=True, env=WITH_AUTOGLM)
    try:
        assert holder.stdout.readline() == "held\n"
        with caplog.at_level("INFO", logger="autoglm.kernels.build_lock"):
            with pytest.raises(LockTimeout, match=f"process {holder.pid} has held the kernel build lock .* over 1 s"):
                with build_lock(path, timeout_s=1):
                    pass
        assert f"waiting for process {holder.pid}" in caplog.text
    finally:
        holder.kill()
        holder.wait()
    with build_lock(path, timeout_s=HANG_S):  # free once its holder has gone
        pass


# ---- the build child -----------------------------------------------------------------
def test_a_library_builds_in_the_background_and_is_then_found_in_the_cache(tmp_path, caplog):
    spec = fake_spec(tmp_path / "src")
    with caplog.at_level("INFO", logger="autoglm.kernels.background_build"):
        build = BackgroundBuild(spec, tmp_path / "cache")
        build.start()
        assert build.wait(HANG_S).answer() == 42
    assert "building kernel library fake_kernels in the background" in caplog.text
    assert "built kernel library fake_kernels in" in caplog.text
    again = BackgroundBuild(spec, tmp_path / "cache")
    with caplog.at_level("INFO", logger="autoglm.kernels.background_build"):
        again.start()
    assert again.child_pid is None and again.module is not None  # imported at once, nothing rebuilt
    assert "loaded kernel library fake_kernels from" in caplog.text


def test_a_failed_build_leaves_the_caller_without_the_library(tmp_path, caplog):
    spec = fake_spec(tmp_path / "src")
    Path(spec.sources[0]).write_text("this is not C++")
    build = BackgroundBuild(spec, tmp_path / "cache")
    build.start()
    with caplog.at_level("WARNING", logger="autoglm.kernels.background_build"):
        assert build.wait(HANG_S) is None
    assert "building kernel library fake_kernels failed (exit status 1" in caplog.text


def test_a_build_gives_up_on_a_live_lock_after_its_bound(tmp_path, caplog):
    spec = fake_spec(tmp_path / "src")
    root = tmp_path / "cache"
    with build_lock(spec.lock_path(root), timeout_s=0):
        build = BackgroundBuild(spec, root, lock_timeout_s=1)
        build.start()
        with caplog.at_level("INFO", logger="autoglm.kernels.background_build"):
            assert build.wait(HANG_S) is None
    assert f"process {os.getpid()} has held the kernel build lock" in caplog.text


_PARENT = """
import sys, time
from pathlib import Path
from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.kernel_spec import KernelSpec
build = BackgroundBuild(KernelSpec.from_json(sys.argv[1]), Path(sys.argv[2]))
build.start()
print(build.child_pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_build_killed_midway_with_its_parent_ends_and_the_next_start_builds(tmp_path):
    spec = fake_spec(tmp_path / "src", slow=True)
    root = tmp_path / "cache"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, spec.to_json(), str(root)], stdout=subprocess.PIPE,
                              text=True, env=WITH_AUTOGLM)
    child = int(parent.stdout.readline())
    partial = f"{spec.build_dir(root).name}{PARTIAL_MARK}{child}"
    wait_until(lambda: (root / partial).exists(), "the child started compiling")
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_until(lambda: is_gone(child), "the build child ended with its parent")
    assert not spec.library(root).exists() and (root / partial).exists()
    key = spec.key()
    make_quick(spec)
    assert spec.key() == key  # the next start builds the very library the killed one was building
    build = BackgroundBuild(spec, root)
    build.start()
    assert build.wait(HANG_S).answer() == 42
    assert not list(root.glob(f"*{PARTIAL_MARK}*"))  # the killed build's folder was cleared


@pytest.mark.slow
def test_an_exiting_parent_kills_its_build(tmp_path):
    spec = fake_spec(tmp_path / "src", slow=True)
    build = BackgroundBuild(spec, tmp_path / "cache")
    build.start()
    wait_until(lambda: lock_holder(spec.lock_path(tmp_path / "cache")) == build.child_pid, "the child took the lock")
    build.terminate()  # what the exit handler runs
    assert build.wait(HANG_S) is None and is_gone(build.child_pid)


def test_the_cpu_kernels_are_not_promised_after_their_build_failed(tmp_path, monkeypatch):
    from autoglm.kernels import cpu_extension

    spec = fake_spec(tmp_path / "src")
    Path(spec.sources[0]).write_text("this is not C++")
    failed = BackgroundBuild(spec, tmp_path / "cache")
    failed.start()
    failed.wait(HANG_S)
    monkeypatch.setattr(cpu_extension, "_build", failed)
    monkeypatch.setattr(cpu_extension, "_outside_steps", None)  # as in a process whose build failed
    assert not cpu_extension.start_cpu_kernel_build() and cpu_extension.cpu_kernels() is None



def test_a_build_outlives_the_thread_that_started_it_while_its_process_lives(tmp_path, caplog):
    # The kernel sends the parent-death signal when the starting thread ends, not only its process.
    spec = fake_spec(tmp_path / "src")
    root = tmp_path / "cache"
    build = BackgroundBuild(spec, root)
    child_listens = threading.Event()

    def start_then_end() -> None:
        build.start()
        child_listens.wait(HANG_S)

    with caplog.at_level("INFO", logger="autoglm.kernels.background_build"):
        with build_lock(spec.lock_path(root), timeout_s=0):  # the child reports waiting here, its signals set up
            starter = threading.Thread(target=start_then_end)
            starter.start()
            wait_until(lambda: "fake_kernels build: waiting for process" in caplog.text, "the child waits for the lock")
            child_listens.set()
            starter.join()
        assert build.wait(HANG_S).answer() == 42
