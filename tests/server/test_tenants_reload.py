"""The tenants file read again while the server runs, by an admin call or SIGHUP: requests in flight all
finish, and a key removed from the file is refused from then on."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import httpx
import pytest

from tests.server.live_server import (
    PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, slow_down_steps, start_server, wait_for_health,
)
from tests.server.tenants_files import TenantsFixture, bearer

NUM_STREAMS = 50
STREAM_TOKENS = 24


@pytest.fixture
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team"}])
    fixture.add_key("ops-key", "ops")
    fixture.add_key("team-key", "team")
    return fixture


def without_key(tenants: TenantsFixture, name: str) -> TenantsFixture:
    return TenantsFixture(tenants.tenants, {k: v for k, v in tenants.keys.items() if k != name},
                          [stored for stored in tenants.stored if stored["id"] != name])


async def stream_completion(url: str, key: str, started: asyncio.Queue[None], go: asyncio.Event) -> str | None:
    """Start a streamed completion, hold it open until `go`, and return its last choice's finish reason."""
    body = {"prompt": "Hello world", "max_tokens": STREAM_TOKENS, "ignore_eos": True, "stream": True}
    async with httpx.AsyncClient(timeout=120) as client:
        async with client.stream("POST", url + "/v1/completions", json=body, headers=bearer(key)) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            payloads = [await anext(lines)]
            started.put_nowait(None)
            await go.wait()
            payloads += [line async for line in lines]
    events = [line.removeprefix("data: ") for line in payloads if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return json.loads(events[-2])["choices"][0]["finish_reason"]


def test_a_reload_during_50_streams_drops_none_and_refuses_a_removed_key(chat_model, tenants, tmp_path, monkeypatch):
    path = tenants.write(tmp_path / "tenants.yaml")
    server = start_server(chat_model, tenants_file=str(path), max_num_seqs=64)
    slow_down_steps(server, monkeypatch)
    team_key, ops_key = tenants.keys["team-key"], tenants.keys["ops-key"]

    async def run() -> tuple[list[str | None], httpx.Response]:
        started: asyncio.Queue[None] = asyncio.Queue()
        go = asyncio.Event()
        streams = [asyncio.create_task(stream_completion(server.url, team_key, started, go))
                   for _ in range(NUM_STREAMS)]
        for _ in range(NUM_STREAMS):
            await asyncio.wait_for(started.get(), timeout=120)
        without_key(tenants, "team-key").write(path)
        async with httpx.AsyncClient() as client:
            reload = await client.post(server.url + "/admin/reload", headers=bearer(ops_key))
        go.set()
        return await asyncio.gather(*streams), reload

    try:
        reasons, reload = asyncio.run(run())
        refused = httpx.get(server.url + "/v1/models", headers=bearer(team_key))
        still_served = httpx.get(server.url + "/v1/models", headers=bearer(ops_key))
    finally:
        server.stop()
    assert reload.status_code == 200 and reload.json() == {"tenants": 2, "keys": 1}
    assert reasons == ["length"] * NUM_STREAMS
    assert refused.status_code == 401 and still_served.status_code == 200


@pytest.mark.slow
@pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S)
def test_sighup_reads_the_tenants_file_again(chat_model, tenants, tmp_path):
    path = tenants.write(tmp_path / "tenants.yaml")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "autoglm", "serve", "--model", str(chat_model), "--port", str(port),
               "--max-context-len", "256", "--kv-cache-memory", "4MiB", "--tenants-file", str(path),
               "--usage-db", ":memory:"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    team_key = tenants.keys["team-key"]

    def team_key_status() -> int:
        return httpx.get(url + "/v1/models", headers=bearer(team_key)).status_code

    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        assert team_key_status() == 200
        path.write_text("not: [a, tenants, file")
        process.send_signal(signal.SIGHUP)
        assert "malformed tenants file" in read_until(process, "the tenants file was not read again")
        assert team_key_status() == 200, "a bad file leaves the old one served"
        without_key(tenants, "team-key").write(path)
        process.send_signal(signal.SIGHUP)
        read_until(process, f"tenants file {path} read again: 2 tenants, 1 keys")
        assert team_key_status() == 401
        assert process.poll() is None, "SIGHUP does not stop the server"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def read_until(process: subprocess.Popen[str], text: str) -> str:
    """The server's next output line holding `text` (the test's timeout catches one that never comes)."""
    assert process.stdout is not None
    return next(line for line in process.stdout if text in line)
