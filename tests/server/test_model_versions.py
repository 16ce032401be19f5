"""Several versions of a model in one server: routing by the model field, the version named in every
response, /v1/models, the admin operations, refusals that keep the old version serving, per-version metrics."""
from __future__ import annotations

import shutil

import httpx
import pytest

from tests.server.live_server import wait_until
from autoglm.registry import DirectoryRegistry
from tests.server.model_versions import MODEL, PROMPT, complete, operate, register_copy, serve_registry, served_model
from tests.server.tenants_files import TenantsFixture, bearer


@pytest.fixture
def served(registry_dir):
    running = serve_registry(registry_dir)
    yield running
    running.stop()


def test_the_model_field_routes_and_every_response_names_its_version(served):
    by_name = complete(served.url)
    assert by_name["model"] == f"{MODEL}@1"
    assert complete(served.url, model=f"{MODEL}@stable")["model"] == f"{MODEL}@1"
    second = complete(served.url, model=f"{MODEL}@2")
    assert second["model"] == f"{MODEL}@2"
    assert second["choices"][0]["text"] != by_name["choices"][0]["text"]  # different weights served
    assert complete(served.url, model=None)["model"] == f"{MODEL}@1"  # no model: the default's stable


def test_a_streamed_answer_names_its_version_in_every_chunk(served):
    body = {"model": f"{MODEL}@2", "prompt": "Hello", "max_tokens": 4, "stream": True}
    with httpx.stream("POST", served.url + "/v1/completions", json=body, timeout=60) as response:
        models = {line for line in response.iter_lines() if line.startswith("data: {")}
    assert models and all(f'"model":"{MODEL}@2"' in line for line in models)


def test_an_unloaded_version_or_unknown_model_is_a_404_naming_what_is_served(served):
    for model, named in ((f"{MODEL}@7", f"{MODEL}@1 (stable), {MODEL}@2"), ("other", f"'{MODEL}'")):
        response = httpx.post(served.url + "/v1/completions", json={"model": model, "prompt": "Hi"}, timeout=30)
        assert response.status_code == 404
        assert named in response.json()["error"]["message"]


def test_v1_models_lists_each_name_and_version_with_its_aliases(served):
    cards = {card["id"]: card for card in httpx.get(served.url + "/v1/models", timeout=10).json()["data"]}
    assert set(cards) == {MODEL, f"{MODEL}@1", f"{MODEL}@2"}
    assert cards[MODEL]["root"] == f"{MODEL}@1"
    assert cards[f"{MODEL}@1"]["aliases"] == ["stable"] and cards[f"{MODEL}@1"]["parent"] == MODEL
    assert cards[f"{MODEL}@2"]["aliases"] == []


def test_admin_models_reports_versions_and_promote_moves_stable_in_the_registry_too(served, registry_dir):
    entry = served_model(served.url)
    assert entry["aliases"] == {"stable": "1"} and entry["canary"] is None
    assert [(v["version"], v["state"], v["aliases"]) for v in entry["versions"]] == [
        ("1", "loaded", ["stable"]), ("2", "loaded", [])]
    promoted = operate(served.url, "promote", version="2")
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["aliases"] == {"stable": "2"}
    assert complete(served.url)["model"] == f"{MODEL}@2"
    assert DirectoryRegistry(registry_dir).aliases(MODEL)["stable"] == "2"
    assert operate(served.url, "rollback").json()["aliases"] == {"stable": "1"}
    assert complete(served.url)["model"] == f"{MODEL}@1"
    nothing = operate(served.url, "rollback")
    assert nothing.status_code == 409 and "no previous stable" in nothing.json()["error"]["message"]


def test_unload_refuses_the_stable_and_unloads_a_standby(served):
    refused = operate(served.url, "unload", version="1")
    assert refused.status_code == 409 and "is the stable" in refused.json()["error"]["message"]
    assert operate(served.url, "unload", version="2").status_code == 200
    assert wait_until(lambda: served_model(served.url)["versions"][1]["state"] == "unloaded")
    assert httpx.post(served.url + "/v1/completions", json={"model": f"{MODEL}@2", "prompt": "Hi"},
                      timeout=30).status_code == 404
    assert operate(served.url, "load", version="2").json()["versions"][1]["state"] == "loaded"
    assert complete(served.url, model=f"{MODEL}@2")["model"] == f"{MODEL}@2"


def test_a_corrupt_or_missing_checkpoint_is_refused_on_promote_and_the_old_stable_keeps_serving(
        served, registry_dir, tmp_path):
    corrupt = register_copy(registry_dir, "2", tmp_path / "corrupt")
    with open(tmp_path / "corrupt" / "model.safetensors", "r+b") as weights:
        weights.seek(-4, 2)
        weights.write(b"\x00\x01\x02\x03")
    missing = register_copy(registry_dir, "2", tmp_path / "missing")
    shutil.rmtree(tmp_path / "missing")
    for version in (corrupt, missing):
        refused = operate(served.url, "promote", version=version)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "checksum_mismatch"
        assert f"{MODEL}@{version}" in refused.json()["error"]["message"]
        assert complete(served.url)["model"] == f"{MODEL}@1"
    assert served_model(served.url)["aliases"] == {"stable": "1"}


def test_a_checkpoint_that_fails_to_load_is_refused_and_the_old_stable_keeps_serving(served, registry_dir, tmp_path):
    broken = register_copy(registry_dir, "2", tmp_path / "broken")
    (tmp_path / "broken" / "config.json").write_text("{not json")  # the weights' checksum still matches
    refused = operate(served.url, "promote", version=broken)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_load_failed"
    assert complete(served.url)["model"] == f"{MODEL}@1"
    assert httpx.get(served.url + "/health", timeout=10).status_code == 200


def test_requests_tokens_errors_and_ttft_are_counted_per_version(served):
    complete(served.url)
    complete(served.url, model=f"{MODEL}@2")
    complete(served.url, model=f"{MODEL}@2")
    metrics = served.metrics()
    for version, requests in (("1", 1), ("2", 2)):
        labels = f"model={MODEL},version={version}"
        assert metrics[f"autoglm:model_version_requests_total{{{labels}}}"] == requests
        assert metrics[f"autoglm:model_version_generation_tokens_total{{{labels}}}"] == 8 * requests
        assert metrics[f"autoglm:model_version_time_to_first_token_seconds_count{{{labels}}}"] == requests
        assert metrics.get(f"autoglm:model_version_errors_total{{{labels}}}", 0) == 0
    text = httpx.get(served.url + "/metrics", timeout=10).text  # each engine's gauges, named by its version
    assert all(f'autoglm:kv_cache_capacity_tokens{{model_name="{MODEL}@{version}"}}' in text for version in "12")


def test_with_keys_the_model_admin_routes_need_an_admin_key_and_tenants_are_allowed_by_model_name(
        registry_dir, tmp_path):
    tenants = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}, {"id": "team", "models": [MODEL]}])
    admin, user = tenants.add_key("ops-key", "ops"), tenants.add_key("team-key", "team")
    running = serve_registry(registry_dir, tenants_file=str(tenants.write(tmp_path / "tenants.yaml")))
    try:
        refused = httpx.get(running.url + "/admin/models", headers=bearer(user), timeout=10)
        assert refused.status_code == 403 and "needs role 'admin'" in refused.json()["error"]["message"]
        assert httpx.get(running.url + "/admin/models", headers=bearer(admin), timeout=10).status_code == 200
        body = {"model": f"{MODEL}@2", "prompt": "Hi", "max_tokens": 2}
        answer = httpx.post(running.url + "/v1/completions", json=body, headers=bearer(user), timeout=30)
        assert answer.status_code == 200 and answer.json()["model"] == f"{MODEL}@2"
    finally:
        running.stop()


def _cached_completion(url: str) -> tuple[dict, str]:
    """A greedy completion of MODEL, and what the response cache did for it."""
    response = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": PROMPT, "max_tokens": 8,
                                                         "temperature": 0}, timeout=60)
    response.raise_for_status()
    return response.json(), response.headers["x-autoglm-cache"]


def test_a_response_cache_hit_is_always_the_answer_of_the_version_serving_now(registry_dir):
    server = serve_registry(registry_dir, response_cache="memory")
    try:
        before, outcome = _cached_completion(server.url)
        assert (before["model"], outcome) == (f"{MODEL}@1", "miss")
        assert _cached_completion(server.url)[1] == "hit"
        assert operate(server.url, "promote", version="2").status_code == 200
        promoted, outcome = _cached_completion(server.url)  # version 1's answer must not be served for 2
        assert (promoted["model"], outcome) == (f"{MODEL}@2", "miss")
        assert promoted["choices"][0]["text"] != before["choices"][0]["text"]
        assert operate(server.url, "rollback").status_code == 200
        after, outcome = _cached_completion(server.url)
        assert (after["model"], outcome) == (f"{MODEL}@1", "hit")
        assert after["choices"][0]["text"] == before["choices"][0]["text"]
    finally:
        server.stop()
