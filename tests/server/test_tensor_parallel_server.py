"""``autoglm serve --tensor-parallel-size 2`` as a real process: a dead worker stops it with a failing status,
and killing it leaves no worker behind."""
from __future__ import annotations

import subprocess
import sys
import time

import httpx
import psutil
import pytest

from autoglm.cli.serve import EXIT_ENGINE_BROKEN
from tests.server.live_server import free_port, wait_for_health

HANG_S = 60  # only to catch a hang

pytestmark = [pytest.mark.slow, pytest.mark.timeout(4 * HANG_S)]


def start_server(model) -> tuple[subprocess.Popen, str, psutil.Process]:
    """The server, its URL once healthy, and its one worker."""
    port = free_port()
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(model), "--port",
               str(port), "--max-context-len", "256", "--kv-cache-memory", "4MiB", "--tensor-parallel-size", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_for_health(url, 200, timeout_s=2 * HANG_S)
    (fork_server,) = [child for child in psutil.Process(process.pid).children()
                      if "forkserver" in " ".join(child.cmdline())]
    (worker,) = fork_server.children()
    return process, url, worker


def test_a_dead_worker_stops_the_server_with_a_failing_status(chat_model):
    process, url, worker = start_server(chat_model)
    try:
        assert "autoglm:tensor_parallel_size" in httpx.get(url + "/metrics").text
        worker.kill()
        assert process.wait(timeout=HANG_S) == EXIT_ENGINE_BROKEN
    finally:
        if process.poll() is None:
            process.kill()
        output = process.communicate()[0]
    assert "tensor-parallel worker rank 1" in output and "must be restarted" in output


def test_killing_the_server_leaves_no_worker(chat_model):
    process, _, worker = start_server(chat_model)
    process.kill()
    process.wait()
    deadline = time.monotonic() + HANG_S
    while worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
