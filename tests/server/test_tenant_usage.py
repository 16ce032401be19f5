"""Each tenant's usage: counted as its requests run, written to SQLite off the event loop, read back
after a restart or a kill -9, today's apart from all time."""
from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from autoglm.outputs import CompletionOutput, RequestMetrics, RequestOutput
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.tenants import usage as usage_module
from autoglm.server.tenants.usage import TenantUsage, Usage, UsageLedger
from autoglm.server.observability.tracking import RequestTracker
from tests.server.live_server import (
    PROCESS_START_S, PROCESS_TEST_TIMEOUT_S, free_port, long_completion, start_server, wait_for_health,
)
from tests.server.tenants_files import TenantsFixture, bearer

ONE_REQUEST = Usage(requests=1, prompt_tokens=5, cached_tokens=2, completion_tokens=3)


def test_usage_is_read_back_from_the_file_after_a_restart(tmp_path):
    path = str(tmp_path / "usage.sqlite")

    async def first_life() -> None:
        ledger = UsageLedger(path)
        ledger.record("team", ONE_REQUEST)
        ledger.record("team", ONE_REQUEST)
        ledger.record("other", ONE_REQUEST)
        await ledger.close()

    async def second_life() -> dict[str, TenantUsage]:
        ledger = UsageLedger(path)
        ledger.record("team", ONE_REQUEST)  # not flushed yet, and counted all the same
        totals = await ledger.totals()
        await ledger.close()
        return totals

    asyncio.run(first_life())
    totals = asyncio.run(second_life())
    three = ONE_REQUEST + ONE_REQUEST + ONE_REQUEST
    assert totals == {"team": TenantUsage(today=three, all_time=three),
                      "other": TenantUsage(today=ONE_REQUEST, all_time=ONE_REQUEST)}
    assert three == Usage(requests=3, prompt_tokens=15, cached_tokens=6, completion_tokens=9)


def test_today_holds_only_todays_requests(tmp_path, monkeypatch):
    async def run() -> dict[str, TenantUsage]:
        ledger = UsageLedger(str(tmp_path / "usage.sqlite"))
        monkeypatch.setattr(usage_module, "utc_day", lambda: "2020-01-01")
        ledger.record("team", ONE_REQUEST)
        await ledger.flush()
        ledger.record("team", ONE_REQUEST)  # pending, and of another day too
        monkeypatch.undo()
        ledger.record("team", ONE_REQUEST)
        totals = await ledger.totals()
        await ledger.close()
        return totals

    totals = asyncio.run(run())
    assert totals["team"] == TenantUsage(today=ONE_REQUEST, all_time=ONE_REQUEST + ONE_REQUEST + ONE_REQUEST)


def test_a_failed_write_keeps_the_counts_for_the_next_flush(tmp_path, monkeypatch):
    async def run() -> dict[str, TenantUsage]:
        ledger = UsageLedger(str(tmp_path / "usage.sqlite"))
        ledger.record("team", ONE_REQUEST)
        write = ledger._write

        def failing_write(pending):
            raise usage_module.sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(ledger, "_write", failing_write)
        await ledger.flush()
        monkeypatch.setattr(ledger, "_write", write)
        await ledger.close()
        reopened = UsageLedger(ledger.path)
        totals = await reopened.totals()
        await reopened.close()
        return totals

    assert asyncio.run(run())["team"].all_time == ONE_REQUEST


def test_the_default_file_is_under_the_users_data_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert usage_module.default_usage_db() == tmp_path / "autoglm" / "usage.sqlite"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert usage_module.default_usage_db() == tmp_path / ".local" / "share" / "autoglm" / "usage.sqlite"


@pytest.fixture
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team"}, {"id": "viewers",
                                                                                      "role": "reader"}])
    fixture.add_key("ops-key", "ops")
    fixture.add_key("team-key", "team")
    fixture.add_key("reader-key", "viewers")
    return fixture


def complete(url: str, key: str, max_tokens: int) -> dict:
    response = httpx.post(url + "/v1/completions", headers=bearer(key), timeout=60,
                          json={"prompt": "Hello world", "max_tokens": max_tokens, "ignore_eos": True})
    assert response.status_code == 200
    return response.json()["usage"]


def usage_of(url: str, key: str) -> dict[str, dict]:
    response = httpx.get(url + "/admin/usage", headers=bearer(key), timeout=10)
    assert response.status_code == 200
    return {row["tenant"]: row for row in response.json()["data"]}


def test_a_servers_usage_survives_its_restart(chat_model, tenants, tmp_path):
    settings = {"tenants_file": str(tenants.write(tmp_path / "tenants.yaml")),
                "usage_db": str(tmp_path / "usage.sqlite")}
    server = start_server(chat_model, **settings)
    try:
        answers = [complete(server.url, tenants.keys["team-key"], max_tokens) for max_tokens in (3, 4)]
        refused = httpx.post(server.url + "/v1/completions", headers=bearer(tenants.keys["reader-key"]),
                             json={"prompt": "Hi", "max_tokens": 2})
        assert refused.status_code == 403  # refused before the engine: no usage
    finally:
        server.stop()

    restarted = start_server(chat_model, **settings)
    try:
        complete(restarted.url, tenants.keys["ops-key"], 2)
        by_tenant = usage_of(restarted.url, tenants.keys["ops-key"])
    finally:
        restarted.stop()
    expected = {"requests": 2, "prompt_tokens": sum(a["prompt_tokens"] for a in answers),
                "cached_tokens": sum(a["prompt_tokens_details"]["cached_tokens"] for a in answers),
                "completion_tokens": 7, "cached_requests": 0}
    assert by_tenant["team"]["all_time"] == by_tenant["team"]["today"] == expected
    assert by_tenant["ops"]["all_time"]["requests"] == 1
    assert by_tenant["viewers"]["all_time"]["requests"] == 0


def test_a_user_or_reader_sees_only_its_own_tenants_usage(chat_model, tenants, tmp_path):
    server = start_server(chat_model, tenants_file=str(tenants.write(tmp_path / "tenants.yaml")))
    try:
        complete(server.url, tenants.keys["ops-key"], 2)
        complete(server.url, tenants.keys["team-key"], 2)
        assert list(usage_of(server.url, tenants.keys["team-key"])) == ["team"]
        assert usage_of(server.url, tenants.keys["team-key"])["team"]["all_time"]["requests"] == 1
        assert list(usage_of(server.url, tenants.keys["reader-key"])) == ["viewers"]
        assert list(usage_of(server.url, tenants.keys["ops-key"])) == ["ops", "team", "viewers"]
    finally:
        server.stop()


def test_a_file_from_before_cached_requests_gains_the_column(tmp_path):
    path = tmp_path / "usage.sqlite"
    with usage_module.sqlite3.connect(path) as old:
        old.execute("CREATE TABLE usage (tenant TEXT NOT NULL, day TEXT NOT NULL, requests INTEGER NOT NULL, "
                    "prompt_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL, "
                    "completion_tokens INTEGER NOT NULL, PRIMARY KEY (tenant, day))")
        old.execute("INSERT INTO usage VALUES ('team', '2020-01-01', 1, 5, 2, 3)")
    old.close()

    async def run() -> dict[str, TenantUsage]:
        ledger = UsageLedger(str(path))
        ledger.record("team", Usage(requests=1, prompt_tokens=5, cached_tokens=2, completion_tokens=3,
                                    cached_requests=1))
        await ledger.close()
        reopened = UsageLedger(str(path))
        totals = await reopened.totals()
        await reopened.close()
        return totals

    assert asyncio.run(run())["team"].all_time == Usage(requests=2, prompt_tokens=10, cached_tokens=4,
                                                        completion_tokens=6, cached_requests=1)


def delta(request_id: str, new_tokens: int, prompt_tokens: int = 5, cached_tokens: int = 2) -> RequestOutput:
    completion = CompletionOutput(0, "", list(range(new_tokens)))
    return RequestOutput(request_id, None, list(range(prompt_tokens)), [completion], False, RequestMetrics(0.0),
                         num_cached_tokens=cached_tokens)


def test_a_running_request_is_in_the_usage_with_each_step_before_it_ends(tmp_path):
    async def run() -> list[Usage]:
        ledger = UsageLedger(str(tmp_path / "usage.sqlite"))
        tracker = RequestTracker("r", ServerMetrics("m", lambda: None), tenant="team", usage=ledger)
        seen = []
        for step in (delta("r-0", 1), delta("r-1", 1, prompt_tokens=3, cached_tokens=0), delta("r-0", 4)):
            tracker.count(step)
            await ledger.flush()  # what a crash now would find in the file
            seen.append((await ledger.totals())["team"].all_time)
        tracker.finish(200)
        await ledger.close()
        reopened = UsageLedger(ledger.path)
        seen.append((await reopened.totals())["team"].all_time)
        await reopened.close()
        return seen

    # One request of two prompts: the request once, each prompt with its first tokens, then each step's tokens.
    assert asyncio.run(run()) == [Usage(requests=1, prompt_tokens=5, cached_tokens=2, completion_tokens=1),
                                  Usage(requests=1, prompt_tokens=8, cached_tokens=2, completion_tokens=2),
                                  Usage(requests=1, prompt_tokens=8, cached_tokens=2, completion_tokens=6),
                                  Usage(requests=1, prompt_tokens=8, cached_tokens=2, completion_tokens=6)]


def recorded_usage(db: Path, tenant: str) -> tuple[int, int, int] | None:
    """(requests, prompt_tokens, completion_tokens) of `tenant` in the file, None before its first write."""
    try:
        with sqlite3.connect(db) as connection:
            return connection.execute("SELECT requests, prompt_tokens, completion_tokens FROM usage WHERE tenant = ?",
                                      (tenant,)).fetchone()
    except sqlite3.OperationalError:  # the server is writing, or has not made the table yet
        return None


@pytest.mark.slow
@pytest.mark.timeout(PROCESS_TEST_TIMEOUT_S)
def test_a_stream_killed_with_sigkill_keeps_its_request_and_delivered_tokens(chat_model, tenants, tmp_path):
    """A real `autoglm serve` whose engine holds its steps after the first token (until a gate file that never
    comes), so the stream is surely in flight when the process is killed."""
    db, port = tmp_path / "usage.sqlite", free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "tests.server.gated_serve", str(tmp_path / "gate"), "serve", "--model",
               str(chat_model), "--port", str(port), "--max-context-len", "256", "--kv-cache-memory", "4MiB",
               "--tenants-file", str(tenants.write(tmp_path / "tenants.yaml")), "--usage-db", str(db),
               "--usage-flush-interval-s", "0.2"]
    with (tmp_path / "serve.log").open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_health(url, 200, timeout_s=PROCESS_START_S)
        body = long_completion(prompt="Hello world", max_tokens=100, stream=True)
        with httpx.stream("POST", url + "/v1/completions", headers=bearer(tenants.keys["team-key"]), json=body,
                          timeout=60) as stream:
            lines = stream.iter_lines()  # kept: a dropped iterator would close the stream
            assert next(lines).startswith("data: ")
            hang_guard = time.monotonic() + 60
            while (recorded := recorded_usage(db, "team")) is None and time.monotonic() < hang_guard:
                time.sleep(0.05)
            process.kill()
            process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert '"request_id"' not in (tmp_path / "serve.log").read_text(), "the request was still running when killed"
    # Before: nothing of a request that had not ended reached the file.
    assert recorded == (1, 7, 1), "the running request, its 7 prompt tokens and its first token"
    assert recorded_usage(db, "team") == recorded
