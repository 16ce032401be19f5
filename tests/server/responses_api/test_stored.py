"""Stored responses on a server with tenants: read back, listed, deleted; never reached by another tenant (the
same 404 as an id never made); held to tenant_storage_bytes; deleted once storage_retention_days have passed
on a clock the test moves."""
from __future__ import annotations

import sqlite3

import httpx
import openai
import pytest

from autoglm.server.responses_api.routes import STORED_RESPONSES_STATE
from autoglm.server.responses_api.sqlite_store import SqliteResponseStore
from autoglm.server.responses_api.store import SECONDS_PER_DAY
from autoglm.server.responses_api.stored import StoredResponses
from tests.server.manual_clock import ManualClock
from tests.server.responses_api.conftest import MODEL, start_scripted
from tests.server.tenants_files import TenantsFixture, bearer
from tests.server.test_errors import error_of

pytestmark = pytest.mark.timeout(60)

RETENTION_DAYS = 2
QUOTA_BYTES = 900  # more than a long input alone, less than one stored response and that input
LONG_INPUT = "x" * 600


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": "team-a"}, {"id": "team-b"}])
    fixture.add_key("a", "team-a")
    fixture.add_key("b", "team-b")
    fixture.add_key("a-reader", "team-a", role="reader")
    return fixture


def keyed(glm45_model, glm45_tokenizer, tenants, folder, **settings):
    return start_scripted(glm45_model, glm45_tokenizer, tenants_file=str(tenants.write(folder / "tenants.yaml")),
                          data_dir=str(folder / "data"), storage_retention_days=RETENTION_DAYS, **settings)


@pytest.fixture(scope="module")
def keyed_server(glm45_model, glm45_tokenizer, tenants, tmp_path_factory):
    running = keyed(glm45_model, glm45_tokenizer, tenants, tmp_path_factory.mktemp("keyed"))
    running.answer("Stored answer.")
    yield running
    running.server.stop()


def client(server, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=30)


def test_a_stored_response_is_read_back_listed_and_deleted(keyed_server, tenants):
    team_a = client(keyed_server.server, tenants.keys["a"])
    first = team_a.responses.create(model=MODEL, input="Hi")
    created = team_a.responses.create(model=MODEL, previous_response_id=first.id, input=[
        {"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Bonjour"}])
    assert team_a.responses.retrieve(created.id) == created
    listed = team_a.responses.input_items.list(created.id)
    assert [(item.role, item.content[0].text) for item in listed.data] == [
        ("user", "Bonjour"), ("developer", "Answer in French.")]  # its own input only, newest first
    assert all(item.id.startswith("msg_") and item.status == "completed" for item in listed.data)
    oldest = team_a.responses.input_items.list(created.id, order="asc", limit=1)
    assert [item.id for item in oldest.data] == [listed.data[1].id] and oldest.has_more
    assert [item.id for item in team_a.responses.input_items.list(created.id, order="asc",
                                                                  after=oldest.data[0].id)] == [listed.data[0].id]

    url, key = f"{keyed_server.server.url}/v1/responses/{created.id}", bearer(tenants.keys["a"])
    deleted = httpx.delete(url, headers=key)
    assert deleted.json() == {"id": created.id, "object": "response", "deleted": True}
    for again in (httpx.get(url, headers=key), httpx.delete(url, headers=key)):
        assert again.status_code == 404 and error_of(again)["code"] == "response_not_found"
    assert team_a.responses.retrieve(first.id).id == first.id

    unstored = team_a.responses.create(model=MODEL, input="Hi", store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        team_a.responses.retrieve(unstored.id)


def test_a_tenant_never_reaches_anothers_responses(keyed_server, tenants):
    server = keyed_server.server
    kept = client(server, tenants.keys["a"]).responses.create(model=MODEL, input="Secret plans")
    made_up = "resp_" + "0" * 32
    for path in ("", "/input_items"):
        for method in ("GET", "DELETE") if not path else ("GET",):
            theirs, nobodys = (httpx.request(method, f"{server.url}/v1/responses/{response_id}{path}",
                                             headers=bearer(tenants.keys["b"]))
                               for response_id in (kept.id, made_up))
            assert theirs.status_code == nobodys.status_code == 404
            assert error_of(theirs)["message"].replace(kept.id, made_up) == error_of(nobodys)["message"]
    with pytest.raises(openai.BadRequestError) as continued:
        client(server, tenants.keys["b"]).responses.create(model=MODEL, input="More", previous_response_id=kept.id)
    assert continued.value.body["code"] == "previous_response_not_found"
    reader = httpx.get(f"{server.url}/v1/responses/{kept.id}", headers=bearer(tenants.keys["a-reader"]))
    assert reader.status_code == 403
    assert client(server, tenants.keys["a"]).responses.retrieve(kept.id).id == kept.id


def test_stored_responses_count_against_the_tenants_storage_quota(glm45_model, glm45_tokenizer, tenants, tmp_path):
    running = keyed(glm45_model, glm45_tokenizer, tenants, tmp_path, tenant_storage_bytes=QUOTA_BYTES)
    running.answer("Fine.")
    team_a = client(running.server, tenants.keys["a"])
    try:
        first = team_a.responses.create(model=MODEL, input="Hi")
        with pytest.raises(openai.APIStatusError) as refused:
            team_a.responses.create(model=MODEL, input=LONG_INPUT)
        assert refused.value.status_code == 413 and "tenant_storage_bytes" in refused.value.message
        assert client(running.server, tenants.keys["b"]).responses.create(model=MODEL, input=LONG_INPUT).store
        assert team_a.responses.create(model=MODEL, input=LONG_INPUT, store=False).output_text == "Fine."
        team_a.responses.delete(first.id)
        assert team_a.responses.create(model=MODEL, input=LONG_INPUT).store
    finally:
        running.server.stop()


def test_a_response_is_deleted_once_kept_for_the_retention_period(keyed_server, tenants, tmp_path, monkeypatch):
    clock = ManualClock()
    path = tmp_path / "responses.sqlite"
    storage = keyed_server.server.state.config.storage
    store = SqliteResponseStore(path, storage.storage_retention_days * SECONDS_PER_DAY, clock)
    monkeypatch.setattr(keyed_server.server.app.state, STORED_RESPONSES_STATE,
                        StoredResponses(store, storage.tenant_storage_bytes))
    team_a = client(keyed_server.server, tenants.keys["a"])
    kept = team_a.responses.create(model=MODEL, input="Hi")
    clock.advance(RETENTION_DAYS * SECONDS_PER_DAY - 1)
    assert team_a.responses.retrieve(kept.id).id == kept.id
    clock.advance(1)
    with pytest.raises(openai.NotFoundError):
        team_a.responses.retrieve(kept.id)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone() == (0,)
