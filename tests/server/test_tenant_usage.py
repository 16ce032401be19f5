"""Each tenant's usage: counted as its requests end, written to SQLite off the event loop, read back
after a restart, today's apart from all time."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from autoglm.server.tenants import usage as usage_module
from autoglm.server.tenants.usage import TenantUsage, Usage, UsageLedger
from tests.server.live_server import start_server
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
