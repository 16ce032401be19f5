"""A first ``autoglm serve`` on a machine that never built the CPU kernels, as a new user meets it.

It must answer ``/health`` 200 well within a minute while the kernels build in the background,
say what it is doing, stop promptly on Ctrl-C with its build, and start again after being
killed midway. Each test gives the server an empty kernel cache of its own.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoglm.kernels.cpu_extension import REQUIRED_CPU_FLAGS
from autoglm.kernels.toolchain import toolchain_missing
from autoglm.platforms import cpu_has_flags
from tests.server.live_server import free_port, wait_for_health

FIRST_HEALTH_S = 60.0
EXIT_AFTER_CTRL_C_S = 15.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

kernels_can_build = cpu_has_flags(*REQUIRED_CPU_FLAGS) and toolchain_missing() is None


def start_serve(model: Path, cache: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    environment = {**os.environ, "AUTOGLM_KERNEL_CACHE": str(cache)}
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(model), "--port", str(port),
               "--max-context-len", "256", "--kv-cache-memory", "4MiB"]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=environment)
    return process, f"http://127.0.0.1:{port}"


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line names ``text`` (the test's private cache folder): its build, if any."""
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
    for pid in processes_mentioning(str(cache)):
        os.kill(pid, signal.SIGKILL)


def test_first_start_answers_health_while_kernels_build_and_ctrl_c_ends_it_all(chat_model, tmp_path):
    cache, log = tmp_path / "kernels", tmp_path / "serve.log"
    started = time.monotonic()
    process, url = start_serve(chat_model, cache, log)
    try:
        wait_for_health(url, 200, timeout_s=FIRST_HEALTH_S)
        assert time.monotonic() - started < FIRST_HEALTH_S
        text = log.read_text()
        assert "engine ready" in text
        if kernels_can_build:
            assert "in the background" in text and "plain PyTorch runs meanwhile" in text
            assert processes_mentioning(str(cache)), "the kernels should still be building"
        process.send_signal(signal.SIGINT)
        process.wait(timeout=EXIT_AFTER_CTRL_C_S)
        deadline = time.monotonic() + 5
        while processes_mentioning(str(cache)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not processes_mentioning(str(cache)), "Ctrl-C must end the kernel build too"
    finally:
        stop(process, cache)


@pytest.mark.skipif(not kernels_can_build, reason="the CPU kernels cannot build on this machine")
def test_a_start_killed_midway_leaves_nothing_that_blocks_the_next(chat_model, tmp_path):
    cache = tmp_path / "kernels"
    process, url = start_serve(chat_model, cache, tmp_path / "first.log")
    try:
        wait_for_health(url, 200, timeout_s=FIRST_HEALTH_S)
        process.kill()  # mid-build: no chance to clean up
        process.wait()
    finally:
        stop(process, cache)
    second, url = start_serve(chat_model, cache, tmp_path / "second.log")
    try:
        wait_for_health(url, 200, timeout_s=FIRST_HEALTH_S)
        assert "in the background" in (tmp_path / "second.log").read_text()
    finally:
        stop(second, cache)
