"""Keys against a live server, through the openai client and httpx: 401 for a missing, wrong, revoked or
expired key; 403 for a reader generating or a model outside the tenant's list; 200 otherwise."""
from __future__ import annotations

import logging

import httpx
import openai
import pytest

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.server.app import build_app
from autoglm.server.tenants.file import TenantsFileError
from tests.server.live_server import start_server
from tests.server.tenants_files import TenantsFixture, an_hour_ago, bearer

MODEL = "tiny-llama"


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[
        {"id": "team", "role": "user", "models": [MODEL]},
        {"id": "viewers", "role": "reader"},
        {"id": "elsewhere", "role": "user", "models": ["another-model"]},
    ])
    fixture.add_key("team-key", "team")
    fixture.add_key("reader-key", "viewers")
    fixture.add_key("elsewhere-key", "elsewhere")
    fixture.add_key("revoked-key", "team", revoked=True)
    fixture.add_key("expired-key", "team", expires=an_hour_ago())
    return fixture


@pytest.fixture(scope="module")
def keyed_server(chat_model, tenants, tmp_path_factory):
    path = tenants.write(tmp_path_factory.mktemp("tenants") / "tenants.yaml")
    running = start_server(chat_model, served_model_name=MODEL, tenants_file=str(path))
    yield running
    running.stop()


def client(server, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=60)


def complete(server, key: str) -> openai.types.Completion:
    return client(server, key).completions.create(model=MODEL, prompt="Hello", max_tokens=2)


@pytest.mark.parametrize("path", ["/v1/models", "/tokenize", "/detokenize", "/tokenizer_info", "/v1/completions",
                                  "/v1/chat/completions"])
def test_a_request_without_a_key_is_401_in_openais_shape(keyed_server, path):
    method = "GET" if path in ("/v1/models", "/tokenizer_info") else "POST"
    response = httpx.request(method, keyed_server.url + path, json={})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert response.headers["www-authenticate"] == "Bearer"


def test_the_key_is_checked_before_the_body_is_read(keyed_server):
    response = httpx.post(keyed_server.url + "/v1/completions", content=b"{not json",
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 401


def test_an_unknown_v1_route_needs_a_key_too(keyed_server):
    assert httpx.get(keyed_server.url + "/v1/moderations").status_code == 401


@pytest.mark.parametrize("key", ["agk-wrong", "not even a key"])
def test_a_wrong_key_is_401(keyed_server, key):
    with pytest.raises(openai.AuthenticationError) as raised:
        complete(keyed_server, key)
    assert raised.value.code == "invalid_api_key"


@pytest.mark.parametrize(("name", "reason"), [("revoked-key", "revoked"), ("expired-key", "expired")])
def test_a_revoked_or_expired_key_is_401_saying_which(keyed_server, tenants, name, reason):
    with pytest.raises(openai.AuthenticationError) as raised:
        complete(keyed_server, tenants.keys[name])
    assert reason in raised.value.message and name in raised.value.message


def test_a_key_in_another_scheme_is_401(keyed_server, tenants):
    response = httpx.get(keyed_server.url + "/v1/models", headers={"Authorization": tenants.keys["team-key"]})
    assert response.status_code == 401


def test_a_users_key_generates(keyed_server, tenants):
    assert complete(keyed_server, tenants.keys["team-key"]).choices[0].text is not None
    reply = client(keyed_server, tenants.keys["team-key"]).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert reply.choices[0].message is not None


def test_a_reader_may_not_generate(keyed_server, tenants):
    with pytest.raises(openai.PermissionDeniedError) as raised:
        complete(keyed_server, tenants.keys["reader-key"])
    assert raised.value.code == "insufficient_permissions"
    assert "reader" in raised.value.message


def test_a_reader_lists_models_and_tokenizes(keyed_server, tenants):
    headers = bearer(tenants.keys["reader-key"])
    assert [model.id for model in client(keyed_server, tenants.keys["reader-key"]).models.list()] == [MODEL]
    tokens = httpx.post(keyed_server.url + "/tokenize", json={"prompt": "Hello"}, headers=headers)
    assert tokens.status_code == 200
    text = httpx.post(keyed_server.url + "/detokenize", json={"tokens": tokens.json()["tokens"]}, headers=headers)
    assert text.status_code == 200


def test_a_model_outside_the_tenants_list_is_403(keyed_server, tenants):
    with pytest.raises(openai.PermissionDeniedError) as raised:
        complete(keyed_server, tenants.keys["elsewhere-key"])
    assert raised.value.code == "model_not_allowed"
    assert "another-model" in raised.value.message
    response = httpx.post(keyed_server.url + "/tokenize", json={"prompt": "Hello"},
                          headers=bearer(tenants.keys["elsewhere-key"]))
    assert response.status_code == 403


def test_models_lists_only_the_tenants_models(keyed_server, tenants):
    assert list(client(keyed_server, tenants.keys["elsewhere-key"]).models.list()) == []


def test_a_model_outside_the_tenants_list_is_retrieved_as_an_unknown_one(keyed_server, tenants):
    assert client(keyed_server, tenants.keys["team-key"]).models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as raised:
        client(keyed_server, tenants.keys["elsewhere-key"]).models.retrieve(MODEL)
    assert raised.value.code == "model_not_found"
    refused = httpx.get(keyed_server.url + f"/v1/models/{MODEL}", headers={"x-request-id": "who-1"})
    assert refused.status_code == 401 and refused.headers["x-request-id"] == "who-1"


def test_health_metrics_and_version_stay_open(keyed_server):
    for path in ("/health", "/metrics", "/version"):
        assert httpx.get(keyed_server.url + path).status_code == 200


def test_keys_appear_in_no_log_line_response_or_metric(keyed_server, tenants, caplog):
    with caplog.at_level(logging.DEBUG):
        complete(keyed_server, tenants.keys["team-key"])
        with pytest.raises(openai.AuthenticationError) as refused:
            complete(keyed_server, tenants.keys["revoked-key"])
    seen = caplog.text + str(refused.value.body) + httpx.get(keyed_server.url + "/metrics").text
    for key in tenants.keys.values():
        assert key not in seen


def test_the_one_api_key_setting_keys_the_server(chat_model):
    running = start_server(chat_model, served_model_name=MODEL, api_key="agk-the-one-key")
    try:
        assert complete(running, "agk-the-one-key").choices
        with pytest.raises(openai.AuthenticationError):
            complete(running, "agk-another-key")
    finally:
        running.stop()


def test_an_open_server_says_so_in_one_warning(chat_model, caplog):
    with caplog.at_level(logging.WARNING, logger="autoglm.server.app"):
        build_app(AutoGLMConfig(model=str(chat_model)).server_config())
    assert [record.getMessage() for record in caplog.records] == [
        "neither tenants_file nor api_key is set: anyone who reaches the server may use it"]


def test_a_bad_tenants_file_stops_the_start(chat_model, tmp_path):
    bad = tmp_path / "tenants.yaml"
    bad.write_text("tenants:\n  - id: team\n    role: owner\n")
    with pytest.raises(TenantsFileError, match=r"tenant 'team': role"):
        build_app(AutoGLMConfig(model=str(chat_model), tenants_file=str(bad)).server_config())


def test_tenants_file_and_api_key_together_are_refused(chat_model, tmp_path):
    config = AutoGLMConfig(model=str(chat_model), tenants_file=str(tmp_path / "t.yaml"), api_key="agk-x")
    with pytest.raises(ConfigError, match="tenants_file and api_key are both set"):
        build_app(config.server_config())


def test_the_api_key_setting_is_not_printed_with_the_settings():
    assert "agk-secret" not in repr(AutoGLMConfig(api_key="agk-secret"))
