"""POST /v1/load_lora_adapter and /v1/unload_lora_adapter on a keyed server: an admin's routes, every refusal
naming what is wrong, and tenants allowed adapters by name as they are models."""
from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from autoglm.errors import LoRACapacityError

from tests.lora.adapters import ADAPTER_SPECS, make_adapter, make_adapter_for_other_base
from tests.server.tenants_files import TenantsFixture, bearer, serve_tenants

SPEC = ADAPTER_SPECS["everything"]  # rank 16 on attention and MLP, rsLoRA
BASE = "base"


@pytest.fixture(scope="module")
def adapters(chat_model, tmp_path_factory) -> Path:
    """The allowed folder: adapters alpha and beta of the base, and `narrow`, made for a model of other sizes."""
    folder = tmp_path_factory.mktemp("allowed-adapters")
    for seed, name in enumerate(("alpha", "beta"), start=1):
        make_adapter(chat_model, folder / name, SPEC, seed)
    make_adapter_for_other_base(folder / "narrow", SPEC, hidden_size=32)
    return folder


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[
        {"id": "ops", "role": "admin"},
        {"id": "team", "role": "user", "models": [BASE, "alpha"]},
        {"id": "others", "role": "user", "models": [BASE]},
    ])
    for tenant in ("ops", "team", "others"):
        fixture.add_key(tenant, tenant)
    return fixture


@pytest.fixture(scope="module")
def served(chat_model, adapters, tenants, tmp_path_factory):
    running = serve_tenants(chat_model, tenants, tmp_path_factory.mktemp("lora-tenants"), served_model_name=BASE,
                            enable_lora=True, max_cpu_loras=4, allowed_lora_path=str(adapters),
                            lora_modules=[f"alpha={adapters / 'alpha'}"])
    yield running
    running.stop()


def _post(served, route: str, key: str, **body: object) -> httpx.Response:
    return httpx.post(served.url + route, json=body, headers=bearer(key), timeout=60)


def _complete(served, key: str, model: str) -> httpx.Response:
    return _post(served, "/v1/completions", key, model=model, prompt="Hello world", max_tokens=6, temperature=0)


def _cards(served, key: str) -> dict[str, dict]:
    listed = httpx.get(served.url + "/v1/models", headers=bearer(key), timeout=10).json()["data"]
    return {card["id"]: card for card in listed}


def test_an_admin_loads_an_adapter_that_then_serves_by_name_until_unloaded(served, tenants, adapters):
    admin = tenants.keys["ops"]
    loaded = _post(served, "/v1/load_lora_adapter", admin, lora_name="beta", lora_path="beta")
    assert loaded.status_code == 200 and "added successfully" in loaded.text
    again = _post(served, "/v1/load_lora_adapter", admin, lora_name="beta", lora_path=str(adapters / "beta"))
    assert again.status_code == 200 and "already loaded" in again.text
    answer = _complete(served, admin, "beta").json()
    assert answer["model"] == "beta"
    assert answer["choices"][0]["text"] != _complete(served, admin, BASE).json()["choices"][0]["text"]
    card = _cards(served, admin)["beta"]
    assert card["parent"] == BASE and card["root"] == str((adapters / "beta").resolve())
    unloaded = _post(served, "/v1/unload_lora_adapter", admin, lora_name="beta")
    assert unloaded.status_code == 200 and "removed successfully" in unloaded.text
    gone = _complete(served, admin, "beta")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "model_not_found"
    assert "beta" not in _cards(served, admin)
    again = _post(served, "/v1/unload_lora_adapter", admin, lora_name="beta")
    assert again.status_code == 404 and "loaded adapters: alpha" in again.json()["error"]["message"]


@pytest.mark.parametrize("body, status, code, says", [
    ({"lora_name": "alpha", "lora_path": "beta"}, 400, "lora_name_taken", "already the name of the adapter at"),
    ({"lora_name": BASE, "lora_path": "beta"}, 400, "lora_name_taken", "already the name of a model"),
    ({"lora_name": "a@1", "lora_path": "beta"}, 400, "invalid_value", "may not be empty or hold '@'"),
    ({"lora_name": "gamma", "lora_path": ".."}, 400, "lora_path_not_allowed", "outside allowed_lora_path"),
    ({"lora_name": "gamma", "lora_path": "/etc"}, 400, "lora_path_not_allowed", "outside allowed_lora_path"),
    ({"lora_name": "gamma", "lora_path": "missing"}, 404, "lora_adapter_not_found", "gamma"),
    ({"lora_name": "gamma", "lora_path": "narrow"}, 400, "invalid_lora_adapter", "gamma"),
    ({"lora_name": "gamma"}, 400, None, "lora_path"),
])
def test_a_refused_load_names_the_problem_and_loads_nothing(served, tenants, body, status, code, says):
    admin = tenants.keys["ops"]
    refused = _post(served, "/v1/load_lora_adapter", admin, **body)
    assert refused.status_code == status, refused.text
    error = refused.json()["error"]
    assert says in error["message"] and (code is None or error["code"] == code)
    assert set(_cards(served, admin)) == {BASE, "alpha"}


def test_unloading_a_model_is_refused(served, tenants):
    refused = _post(served, "/v1/unload_lora_adapter", tenants.keys["ops"], lora_name=BASE)
    assert refused.status_code == 400 and "not an adapter loaded by name" in refused.json()["error"]["message"]


def test_only_an_admin_key_loads_or_unloads_adapters(served, tenants):
    for route, body in (("/v1/load_lora_adapter", {"lora_name": "beta", "lora_path": "beta"}),
                        ("/v1/unload_lora_adapter", {"lora_name": "alpha"})):
        refused = _post(served, route, tenants.keys["team"], **body)
        assert refused.status_code == 403 and "needs role 'admin'" in refused.json()["error"]["message"]


def test_a_tenants_models_list_names_adapters_as_models(served, tenants):
    team, others = tenants.keys["team"], tenants.keys["others"]
    assert _complete(served, team, "alpha").status_code == 200
    refused = _complete(served, others, "alpha")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_allowed"
    assert _cards(served, team)["alpha"]["parent"] == BASE
    assert set(_cards(served, others)) == {BASE}


def test_no_room_for_another_adapter_is_a_503_to_retry(served, tenants, monkeypatch):
    async def all_busy(lora_request):
        raise LoRACapacityError("max_cpu_loras=4 adapters are loaded and every one has requests running")

    monkeypatch.setattr(served.state.engine, "add_lora", all_busy)
    refused = _post(served, "/v1/load_lora_adapter", tenants.keys["ops"], lora_name="beta", lora_path="beta")
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["code"] == "lora_capacity_exceeded"
    assert "beta" not in _cards(served, tenants.keys["ops"])
