"""``autoglm serve --pipeline-parallel-size 2`` as a real process: it serves, and a dead stage stops it with a
failing status, naming the stage, as a dead tensor-parallel worker does."""
from __future__ import annotations

import subprocess
import sys

import httpx
import psutil
import pytest

from autoglm.cli.serve import EXIT_ENGINE_BROKEN
from tests.server.live_server import free_port, wait_for_health

HANG_S = 60  # only to catch a hang

pytestmark = [pytest.mark.slow, pytest.mark.timeout(4 * HANG_S)]


def test_a_dead_stage_stops_the_server_with_a_failing_status(chat_model):
    port = free_port()
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(chat_model), "--port", str(port),
               "--max-context-len", "256", "--kv-cache-memory", "4MiB", "-pp", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, 200, timeout_s=2 * HANG_S)
        reply = httpx.post(url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 4}, timeout=HANG_S)
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
        (fork_server,) = [child for child in psutil.Process(process.pid).children()
                          if "forkserver" in " ".join(child.cmdline())]
        (first_stage,) = fork_server.children()
        first_stage.kill()
        assert process.wait(timeout=HANG_S) == EXIT_ENGINE_BROKEN
    finally:
        if process.poll() is None:
            process.kill()
        output = process.communicate()[0]
    assert "pipeline stage 0 (rank 0)" in output and "must be restarted" in output
