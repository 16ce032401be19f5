"""Rate limits kept in a real redis-server: two `autoglm serve` processes share one tenant's budget, and a
Redis that goes away mid-run turns limited requests into a clear 503, said in the log."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.server.live_server import PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, start_server, wait_for_health
from tests.server.redis_server import running_redis
from tests.server.tenants_files import TenantsFixture

REQUESTS_PER_MINUTE = 4

pytestmark = [pytest.mark.slow, pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S)]


@pytest.fixture
def tenants_file(tmp_path) -> tuple[Path, str]:
    fixture = TenantsFixture(tenants=[{"id": "shared", "limits": {"requests_per_minute": REQUESTS_PER_MINUTE}}])
    key = fixture.add_key("shared-key", "shared")
    return fixture.write(tmp_path / "tenants.yaml"), key


def serve(model: Path, tenants: Path, storage: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(model), "--port", str(port),
               "--max-context-len", "256", "--kv-cache-memory", "4MiB", "--tenants-file", str(tenants),
               "--rate-limit-storage", storage, "--usage-db", ":memory:"]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def complete(url: str, key: str) -> httpx.Response:
    return httpx.post(url + "/v1/completions", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                      json={"prompt": "Hi", "max_tokens": 1})


def test_two_server_processes_share_one_budget(chat_model, tenants_file, tmp_path):
    tenants, key = tenants_file
    with running_redis(tmp_path) as redis:
        servers = [serve(chat_model, tenants, redis.url, tmp_path / f"serve-{index}.log") for index in range(2)]
        try:
            for _, url in servers:
                wait_for_health(url, 200, timeout_s=PROCESS_START_S)
            urls = [url for _, url in servers] * REQUESTS_PER_MINUTE
            answers = [complete(url, key) for url in urls[:REQUESTS_PER_MINUTE]]
            refused = [complete(url, key) for url in urls[:2]]
        finally:
            for process, _ in servers:
                process.terminate()
                process.wait(timeout=30)
    assert [answer.status_code for answer in answers] == [200] * REQUESTS_PER_MINUTE
    # Each answer counts down the one budget, whichever server gave it.
    assert [int(answer.headers["x-ratelimit-remaining-requests"]) for answer in answers] == [3, 2, 1, 0]
    for answer in refused:  # each server refuses, though it served only half the budget itself
        assert answer.status_code == 429 and answer.json()["error"]["type"] == "requests"
        assert int(answer.headers["retry-after"]) >= 1


def test_a_redis_outage_is_503_said_once_in_the_log_and_once_when_it_ends(chat_model, tenants_file, tmp_path,
                                                                           caplog):
    tenants, key = tenants_file
    with running_redis(tmp_path) as redis:
        server = start_server(chat_model, tenants_file=str(tenants), rate_limit_storage=redis.url)
        try:
            assert complete(server.url, key).status_code == 200
            redis.stop()
            with caplog.at_level("WARNING", logger="autoglm.server.tenants"):
                refused = [complete(server.url, key) for _ in range(5)]
                lines_during_outage = len(caplog.records)
                redis.start()  # the same port, empty
                served_again = complete(server.url, key)
        finally:
            server.stop()
    for answer in refused:
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "rate_limit_storage_unavailable"
    assert served_again.status_code == 200
    assert lines_during_outage == 1  # not one per refused request (and no headers warning either)
    (went, came_back) = caplog.records
    assert went.levelname == "ERROR" and "the rate-limit storage cannot be reached" in went.getMessage()
    assert came_back.levelname == "WARNING" and "answers again" in came_back.getMessage()
