"""A server killed (SIGKILL) mid-batch and started again on the same data_dir finishes the batch with every
custom_id exactly once: a line recorded done stays done, one in flight at the kill runs again.

The killed server is a process of its own whose engine stops for good once some lines have finished, so
the kill always lands mid-way; the one started again runs in the test's process.
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
from openai import OpenAI

from tests.server.batches.batch_files import chat_line, file_lines, submit, wait_for_end
from tests.server.live_server import (
    PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, start_server, wait_for_health, wait_until,
)

HELD_SERVE_MODULE = "tests.server.batches.held_serve"
LINES = 20
FINISHED_BEFORE_THE_KILL = 6
LINES_IN_FLIGHT = 2

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S)]


def test_a_batch_killed_mid_way_finishes_after_a_restart_with_each_line_once(chat_model, tmp_path):
    data_dir = tmp_path / "data"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", HELD_SERVE_MODULE, str(FINISHED_BEFORE_THE_KILL), "serve",
               "--model", str(chat_model), "--port", str(port), "--max-context-len", "256",
               "--kv-cache-memory", "4MiB", "--data-dir", str(data_dir),
               "--batch-max-lines-in-flight", str(LINES_IN_FLIGHT)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        client = OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
        batch = submit(client, [chat_line(f"line-{number}") for number in range(LINES)])
        assert wait_until(lambda: client.batches.retrieve(batch.id).request_counts.completed
                          >= FINISHED_BEFORE_THE_KILL)
        done_before = client.batches.retrieve(batch.id)
        process.kill()
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert done_before.status == "in_progress" and done_before.request_counts.completed < LINES

    restarted = start_server(chat_model, data_dir=str(data_dir), batch_max_lines_in_flight=LINES_IN_FLIGHT)
    try:
        client = restarted.openai()
        ended = wait_for_end(client, batch.id)
        output, errors = file_lines(client, ended.output_file_id), file_lines(client, ended.error_file_id)
    finally:
        restarted.stop()
    assert ended.status == "completed" and errors == []
    assert Counter(line["custom_id"] for line in output) == Counter(f"line-{number}" for number in range(LINES))
    assert (ended.request_counts.total, ended.request_counts.completed) == (LINES, LINES)
