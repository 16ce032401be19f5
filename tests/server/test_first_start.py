"""A first ``autoglm serve`` on a machine that never built the CPU kernels, as a new user meets it.

It must answer ``/health`` 200 while the kernels build in the background, say what it is doing,
stop promptly on Ctrl-C with its build, and start again after being killed midway. Each test gives
the server an empty kernel cache of its own and a compiler that waits at a gate the test never
opens, so the build is still under way whenever the test looks, however fast or loaded the machine.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from autoglm.kernels.cpu_extension import REQUIRED_CPU_FLAGS
from autoglm.kernels.toolchain import toolchain_missing
from autoglm.platforms import cpu_has_flags
from tests.server.live_server import PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, wait_for_health

EXIT_AFTER_CTRL_C_S = 60.0  # a hang guard: a Ctrl-C'd server drains nothing and stops at once
GONE_AFTER_EXIT_S = 30.0  # a hang guard: the loop below returns as soon as the build is gone

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * PROCESS_TEST_TIMEOUT_S)]

kernels_can_build = cpu_has_flags(*REQUIRED_CPU_FLAGS) and toolchain_missing() is None


def held_compiler(folder: Path) -> Path:
    """A C++ compiler whose compile jobs wait for a file named ``gate`` beside it, which no test creates;
    everything else (``--version``, the link) runs the real one."""
    folder.mkdir()
    wrapper = folder / "c++"
    wrapper.write_text(f'#!/bin/sh\ncase " $* " in *" -c "*) while [ ! -e "{folder}/gate" ]; do sleep 0.1; done;; esac\n'
                       'exec c++ "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def start_serve(model: Path, cache: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    environment = {**os.environ, "AUTOGLM_KERNEL_CACHE": str(cache), "CXX": str(held_compiler_of(cache))}
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(model), "--port", str(port),
               "--max-context-len", "256", "--kv-cache-memory", "4MiB"]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=environment)
    return process, f"http://127.0.0.1:{port}"


def held_compiler_of(cache: Path) -> Path:
    folder = cache.parent / "compiler"
    return folder / "c++" if folder.exists() else held_compiler(folder)


def build_processes(cache: Path) -> list[int]:
    """The build's processes: the child building into ``cache`` and the compilers it runs."""
    return processes_mentioning(str(cache)) + processes_mentioning(str(cache.parent / "compiler"))


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line names ``text``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def stop(process: subprocess.Popen, cache: Path) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
    for pid in build_processes(cache):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_first_start_answers_health_while_kernels_build_and_ctrl_c_ends_it_all(chat_model, tmp_path):
    cache, log = tmp_path / "kernels", tmp_path / "serve.log"
    process, url = start_serve(chat_model, cache, log)
    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        text = log.read_text()
        assert "engine ready" in text
        if kernels_can_build:
            assert "in the background" in text and "serving on plain PyTorch while the CPU kernels are building" in text
            assert httpx.get(url + "/health", timeout=30).json()["cpu_kernels"].startswith("building")
            assert build_processes(cache), "the kernels should still be building"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=EXIT_AFTER_CTRL_C_S)
        deadline = time.monotonic() + GONE_AFTER_EXIT_S
        while build_processes(cache) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not build_processes(cache), "Ctrl-C must end the kernel build too"
    finally:
        stop(process, cache)


@pytest.mark.skipif(not kernels_can_build, reason="the CPU kernels cannot build on this machine")
def test_a_start_killed_midway_leaves_nothing_that_blocks_the_next(chat_model, tmp_path):
    cache = tmp_path / "kernels"
    process, url = start_serve(chat_model, cache, tmp_path / "first.log")
    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        assert build_processes(cache)
        process.kill()  # mid-build: no chance to clean up
        process.wait()
    finally:
        stop(process, cache)
    second, url = start_serve(chat_model, cache, tmp_path / "second.log")
    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        assert "in the background" in (tmp_path / "second.log").read_text()
    finally:
        stop(second, cache)
