"""No answer to a tenant names a model outside its list: not a 404 for a model it may use and the server
does not serve, not a 403 when it omits `model` and the default is not its, not the models list; a request
without `model` goes to a served model the tenant may use."""
from __future__ import annotations

import shutil

import httpx
import pytest

from autoglm.registry import DirectoryRegistry
from tests.server.model_versions import MODEL, serve_registry
from tests.server.tenants_files import TenantsFixture, bearer

HIDDEN = "hidden-model"  # served, in no list but its own tenant's
UNSERVED = "unserved-model"  # in the team's list, not served
ROUTES = {
    "/v1/completions": {"prompt": "Hi", "max_tokens": 2},
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
    "/tokenize": {"prompt": "Hi"},
    "/detokenize": {"tokens": [1, 2]},
}

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def served(versions_registry, tmp_path_factory):
    """MODEL (the default) and HIDDEN served to tenants: `team` may use MODEL (and a model not served),
    `hidden` only HIDDEN, `outsider` none of those served."""
    folder = tmp_path_factory.mktemp("name-leaks")
    registry_dir = folder / "registry"
    shutil.copytree(versions_registry, registry_dir)
    registry = DirectoryRegistry(registry_dir)
    registry.register(HIDDEN, registry.version(MODEL, "1").path)
    tenants = TenantsFixture(tenants=[{"id": "team", "models": [MODEL, UNSERVED]}, {"id": "hidden", "models": [HIDDEN]},
                                      {"id": "outsider", "models": [UNSERVED]}])
    keys = {tenant: bearer(tenants.add_key(f"{tenant}-key", tenant)) for tenant in ("team", "hidden", "outsider")}
    server = serve_registry(registry_dir, references=(MODEL, HIDDEN),
                            tenants_file=str(tenants.write(folder / "tenants.yaml")))
    yield server.url, keys
    server.stop()


def ask(url: str, key: dict[str, str], route: str, **fields: object) -> httpx.Response:
    return httpx.post(url + route, json={**ROUTES[route], **fields}, headers=key, timeout=60)


@pytest.mark.parametrize("route", ROUTES)
def test_answers_to_a_tenant_never_name_a_model_outside_its_list(served, route):
    url, keys = served
    omitted = ask(url, keys["team"], route)
    unserved = ask(url, keys["team"], route, model=UNSERVED)
    forbidden = ask(url, keys["team"], route, model=f"{HIDDEN}@1")
    outsider = ask(url, keys["outsider"], route)
    assert omitted.status_code == 200, omitted.text
    assert unserved.status_code == 404
    assert unserved.json()["error"]["message"] == (f"The model '{UNSERVED}' does not exist; this server serves "
                                                   f"'{MODEL}'.")
    assert forbidden.status_code == 403
    assert forbidden.json()["error"]["message"].endswith(f"it may use: {MODEL}, {UNSERVED}")
    assert outsider.status_code == 403
    assert outsider.json()["error"]["message"] == ("tenant 'outsider' may use none of the models this server "
                                                   f"serves; it may use: {UNSERVED}")
    for answer in (omitted, unserved, outsider):
        assert HIDDEN not in answer.text
    assert MODEL not in outsider.text


def test_a_request_without_model_goes_to_a_model_the_tenant_may_use(served):
    url, keys = served
    completion = ask(url, keys["hidden"], "/v1/completions")
    assert completion.status_code == 200, completion.text
    assert completion.json()["model"] == f"{HIDDEN}@1"


def test_the_models_list_names_only_the_tenants_models(served):
    url, keys = served
    listed = {tenant: httpx.get(url + "/v1/models", headers=key, timeout=10) for tenant, key in keys.items()}
    assert {card["id"] for card in listed["team"].json()["data"]} == {MODEL, f"{MODEL}@1"}
    assert {card["id"] for card in listed["hidden"].json()["data"]} == {HIDDEN, f"{HIDDEN}@1"}
    assert listed["outsider"].json()["data"] == []
    assert HIDDEN not in listed["team"].text and MODEL not in listed["outsider"].text
