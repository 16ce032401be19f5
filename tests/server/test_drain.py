"""``autoglm serve`` as a real process: SIGTERM lets running requests finish, refuses new ones, exits 0.

The server's engine holds the request after its first token until the test opens a gate, so
the refusal is checked while the request is surely still in flight, however fast the machine.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import pytest

from tests.server.live_server import (
    PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, long_completion, wait_for_health,
)

GATED_SERVE_MODULE = "tests.server.gated_serve"
LONG_MAX_TOKENS = 100

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S)]


def test_sigterm_drains_then_exits_zero(chat_model, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    gate = tmp_path / "gate"
    command = [sys.executable, "-m", GATED_SERVE_MODULE, str(gate), "serve", "--model", str(chat_model),
               "--port", str(port), "--max-context-len", "512", "--kv-cache-memory", "4MiB", "--drain-timeout-s", "30"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        body = long_completion(max_tokens=LONG_MAX_TOKENS, stream=True)
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=60) as streamed:
            lines = streamed.iter_lines()
            events = [next(lines)]
            process.send_signal(signal.SIGTERM)
            wait_for_health(url, 503)
            rejected = httpx.post(url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 1}, timeout=10)
            gate.touch()
            events += list(lines)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        output = process.communicate()[0]

    assert rejected.status_code == 503 and rejected.json()["error"]["code"] == "server_draining"
    payloads = [line.removeprefix("data: ") for line in events if line.startswith("data: ")]
    assert payloads[-1] == "[DONE]"
    assert json.loads(payloads[-2])["choices"][0]["finish_reason"] == "length"
    text = "".join(json.loads(p)["choices"][0]["text"] for p in payloads[:-1])
    assert text, "the drained request streamed its text"
    request_lines = [json.loads(line) for line in output.splitlines() if line.startswith('{"request_id"')]
    # Each request is logged as it ends: the refusal came while the streamed request was running.
    assert [(line["status"], line["completion_tokens"]) for line in request_lines] == [
        (503, 0), (200, LONG_MAX_TOKENS)]
