"""What operators see of tenants: per-tenant counters in /metrics (labels bounded to the file's tenants), the
tenant in the request log line; and what they never see: keys anywhere, prompts unless log_prompts is on."""
from __future__ import annotations

import json
import logging

import httpx
import pytest

from autoglm.engine.llm_engine import LLMEngine
from tests.server.gated_serve import hold_steps_until
from tests.server.live_server import scrape_metrics, start_server
from tests.server.tenants_files import TenantsFixture, bearer

# A prompt no other log line could hold by chance.
SECRET_PROMPT = "the vault code is zebra-4471"


@pytest.fixture
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team"}, {"id": "leaving"}])
    fixture.add_key("ops-key", "ops")
    fixture.add_key("team-key", "team")
    fixture.add_key("leaving-key", "leaving")
    return fixture


def complete(url: str, key: str, **fields: object) -> httpx.Response:
    body = {"prompt": SECRET_PROMPT, "max_tokens": 3, "ignore_eos": True, **fields}
    return httpx.post(url + "/v1/completions", json=body, headers=bearer(key), timeout=60)


def request_lines(caplog: pytest.LogCaptureFixture) -> list[dict]:
    return [json.loads(record.getMessage()) for record in caplog.records if record.name == "autoglm.requests"]


def test_each_tenants_requests_and_tokens_are_counted_under_its_label(chat_model, tenants, tmp_path):
    server = start_server(chat_model, tenants_file=str(tenants.write(tmp_path / "tenants.yaml")))
    try:
        usages = [complete(server.url, tenants.keys["team-key"]).json()["usage"] for _ in range(2)]
        complete(server.url, tenants.keys["ops-key"], max_tokens=1).raise_for_status()
        metrics = scrape_metrics(server.url)
    finally:
        server.stop()
    assert metrics["autoglm:tenant_request_success_total{finished_reason=length,tenant=team}"] == 2
    assert metrics["autoglm:tenant_request_success_total{finished_reason=length,tenant=ops}"] == 1
    assert metrics["autoglm:tenant_prompt_tokens_total{tenant=team}"] == sum(u["prompt_tokens"] for u in usages)
    assert metrics["autoglm:tenant_cached_tokens_total{tenant=team}"] == sum(
        u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert metrics["autoglm:tenant_generation_tokens_total{tenant=team}"] == 6
    assert metrics["autoglm:tenant_generation_tokens_total{tenant=ops}"] == 1
    assert metrics["autoglm:request_success_total{finished_reason=length}"] == 3, "the old counter still counts all"


def test_a_tenant_gone_from_the_file_is_counted_as_other(chat_model, tenants, tmp_path, monkeypatch):
    path = tenants.write(tmp_path / "tenants.yaml")
    server = start_server(chat_model, tenants_file=str(path))
    remaining = TenantsFixture(tenants.tenants[:2], stored=tenants.stored[:2])
    gate = tmp_path / "gate"
    monkeypatch.setattr(LLMEngine, "step", LLMEngine.step)  # put back at teardown
    hold_steps_until(gate)  # the request cannot end before the reload, however fast the machine
    try:
        body = {"prompt": "Hello", "max_tokens": 40, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60,
                          headers=bearer(tenants.keys["leaving-key"])) as streamed:
            lines = streamed.iter_lines()
            next(lines)  # the request is running: its tenant is in the file
            remaining.write(path)
            httpx.post(server.url + "/admin/reload", headers=bearer(tenants.keys["ops-key"])).raise_for_status()
            gate.touch()
            list(lines)
        metrics = scrape_metrics(server.url)
    finally:
        server.stop()
    assert metrics["autoglm:tenant_request_success_total{finished_reason=length,tenant=other}"] == 1
    assert not any("tenant=leaving" in name for name in metrics)


def test_no_key_or_prompt_reaches_logs_answers_or_metrics(chat_model, tenants, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    server = start_server(chat_model, tenants_file=str(tenants.write(tmp_path / "tenants.yaml")))
    wrong_key = "agk-" + "x" * 43
    try:
        answers = [complete(server.url, tenants.keys["team-key"]),
                   complete(server.url, tenants.keys["team-key"], stream=True),
                   complete(server.url, wrong_key),
                   complete(server.url, tenants.keys["team-key"], max_tokens=10_000),  # refused: 400
                   httpx.get(server.url + "/admin/tenants", headers=bearer(tenants.keys["ops-key"])),
                   httpx.get(server.url + "/admin/usage", headers=bearer(tenants.keys["ops-key"]))]
        metrics_text = httpx.get(server.url + "/metrics").text
    finally:
        server.stop()
    assert [answer.status_code for answer in answers] == [200, 200, 401, 400, 200, 200]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for key in [*tenants.keys.values(), wrong_key]:
        for text in (logged, metrics_text, *(answer.text for answer in answers)):
            assert key not in text
            assert key.removeprefix("agk-")[:16] not in text
    assert SECRET_PROMPT not in logged
    lines = request_lines(caplog)
    assert [(line["tenant"], line["status"]) for line in lines] == [("team", 200), ("team", 200), ("team", 400)]
    assert all("prompt" not in line for line in lines)


def test_log_prompts_puts_the_prompt_in_the_request_line(chat_model, tenants, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    server = start_server(chat_model, tenants_file=str(tenants.write(tmp_path / "tenants.yaml")), log_prompts=True)
    try:
        complete(server.url, tenants.keys["team-key"]).raise_for_status()
        chat = httpx.post(server.url + "/v1/chat/completions", headers=bearer(tenants.keys["team-key"]), timeout=60,
                          json={"messages": [{"role": "user", "content": SECRET_PROMPT}], "max_tokens": 2})
        chat.raise_for_status()
    finally:
        server.stop()
    completion_line, chat_line = request_lines(caplog)
    assert completion_line["prompt"] == SECRET_PROMPT and completion_line["tenant"] == "team"
    assert chat_line["prompt"] == [{"role": "user", "content": SECRET_PROMPT}]
