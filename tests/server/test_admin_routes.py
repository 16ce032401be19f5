"""/admin/* against a live server: admin keys only (401 without a key, 403 for a user or reader), tenants listed
with their keys by id and never by hash, a key revoked in the file, a bad file refused on reload, and /metrics
keyed by a setting."""
from __future__ import annotations

import httpx
import pytest
import yaml

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.server.app import build_app
from tests.server.live_server import start_server
from tests.server.tenants_files import TenantsFixture, an_hour_ago, bearer

ADMIN_ROUTES = [("GET", "/admin/tenants"), ("POST", "/admin/reload"), ("POST", "/admin/keys/any/revoke")]


@pytest.fixture
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[
        {"id": "ops", "role": "admin"},
        {"id": "team", "models": ["tiny-llama"], "weight": 2.0, "limits": {"requests_per_minute": 60}},
        {"id": "viewers", "role": "reader"},
    ])
    fixture.add_key("ops-key", "ops")
    fixture.add_key("team-key", "team")
    fixture.add_key("reader-key", "viewers")
    fixture.add_key("team-old", "team", expires=an_hour_ago())
    return fixture


@pytest.fixture
def admin_server(chat_model, tenants, tmp_path):
    running = start_server(chat_model, served_model_name="tiny-llama",
                           tenants_file=str(tenants.write(tmp_path / "tenants.yaml")), metrics_require_key=True)
    running.tenants_path = tmp_path / "tenants.yaml"
    yield running
    running.stop()


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES + [("GET", "/admin/usage"), ("GET", "/metrics")])
def test_admin_routes_and_keyed_metrics_need_a_key(admin_server, method, path):
    response = httpx.request(method, admin_server.url + path)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES + [("GET", "/metrics")])
@pytest.mark.parametrize("key", ["team-key", "reader-key"])
def test_a_user_or_reader_key_is_403_on_admin_routes(admin_server, tenants, method, path, key):
    response = httpx.request(method, admin_server.url + path, headers=bearer(tenants.keys[key]))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "insufficient_permissions"


def test_an_admin_key_reads_keyed_metrics(admin_server, tenants):
    response = httpx.get(admin_server.url + "/metrics", headers=bearer(tenants.keys["ops-key"]))
    assert response.status_code == 200 and "autoglm:request_success" in response.text


def test_the_tenants_list_shows_roles_limits_keys_and_usage_but_no_secret(admin_server, tenants):
    httpx.post(admin_server.url + "/v1/completions", headers=bearer(tenants.keys["team-key"]),
               json={"prompt": "Hello", "max_tokens": 2}, timeout=60).raise_for_status()
    response = httpx.get(admin_server.url + "/admin/tenants", headers=bearer(tenants.keys["ops-key"]))
    assert response.status_code == 200
    team = {tenant["id"]: tenant for tenant in response.json()["data"]}["team"]
    assert team["role"] == "user" and team["models"] == ["tiny-llama"] and team["weight"] == 2.0
    assert team["limits"]["requests_per_minute"] == 60
    assert [(key["id"], key["revoked"], key["expired"]) for key in team["keys"]] == [
        ("team-key", False, False), ("team-old", False, True)]
    assert team["usage"]["all_time"]["requests"] == 1 and team["usage"]["all_time"]["completion_tokens"] == 2
    assert "sha256:" not in response.text
    assert not any(key in response.text for key in tenants.keys.values())


def test_a_revoked_key_is_marked_in_the_file_and_refused_at_once(admin_server, tenants):
    response = httpx.post(admin_server.url + "/admin/keys/team-key/revoke", headers=bearer(tenants.keys["ops-key"]))
    assert response.status_code == 200
    assert response.json()["revoked"] is True and response.json()["tenant"] == "team"
    stored = {key["id"]: key for key in yaml.safe_load(admin_server.tenants_path.read_text())["keys"]}
    assert stored["team-key"]["revoked"] is True and "revoked" not in stored["ops-key"]
    refused = httpx.get(admin_server.url + "/v1/models", headers=bearer(tenants.keys["team-key"]))
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]


def test_revoking_an_unknown_key_is_404_naming_the_known_ones(admin_server, tenants):
    response = httpx.post(admin_server.url + "/admin/keys/nobody/revoke", headers=bearer(tenants.keys["ops-key"]))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "key_not_found"
    assert "'nobody'" in response.json()["error"]["message"] and "team-key" in response.json()["error"]["message"]


def test_a_bad_file_on_reload_is_400_and_the_old_one_stays_served(admin_server, tenants):
    admin_server.tenants_path.write_text("tenants:\n  - id: team\n    weight: -1\n")
    response = httpx.post(admin_server.url + "/admin/reload", headers=bearer(tenants.keys["ops-key"]))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_tenants_file"
    assert "tenant 'team': weight" in error["message"]
    assert httpx.get(admin_server.url + "/v1/models", headers=bearer(tenants.keys["team-key"])).status_code == 200


def test_a_reload_serves_the_file_as_it_is_now(admin_server, tenants):
    added = tenants.add_key("new-key", "team")
    tenants.write(admin_server.tenants_path)
    assert httpx.get(admin_server.url + "/v1/models", headers=bearer(added)).status_code == 401
    response = httpx.post(admin_server.url + "/admin/reload", headers=bearer(tenants.keys["ops-key"]))
    assert response.status_code == 200 and response.json() == {"tenants": 3, "keys": 5}
    assert httpx.get(admin_server.url + "/v1/models", headers=bearer(added)).status_code == 200


def test_a_server_with_one_api_key_has_no_file_to_reload(chat_model):
    server = start_server(chat_model, api_key="agk-the-one-key")
    try:
        response = httpx.post(server.url + "/admin/reload", headers=bearer("agk-the-one-key"))
        tenants = httpx.get(server.url + "/admin/tenants", headers=bearer("agk-the-one-key"))
    finally:
        server.stop()
    assert response.status_code == 400 and "api_key" in response.json()["error"]["message"]
    assert [tenant["id"] for tenant in tenants.json()["data"]] == ["default"]


def test_a_server_without_keys_has_no_admin_routes_and_open_metrics(server):
    assert httpx.get(server.url + "/admin/tenants").status_code == 404
    assert httpx.get(server.url + "/metrics").status_code == 200


def test_keyed_metrics_need_keys_to_check(chat_model):
    with pytest.raises(ConfigError, match="metrics_require_key needs keys"):
        build_app(AutoGLMConfig(model=str(chat_model), metrics_require_key=True).server_config())


def test_admin_refusals_are_counted_under_their_route(admin_server, tenants):
    httpx.get(admin_server.url + "/admin/tenants")
    metrics = httpx.get(admin_server.url + "/metrics", headers=bearer(tenants.keys["ops-key"])).text
    assert 'autoglm:http_requests_total{route="/admin/tenants",status="401"} 1.0' in metrics
