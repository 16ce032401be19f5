"""Adapters as registered versions: pinned to their base's checksum, served on the model with those weights, and
promoted, split and rolled back as a model's versions are."""
from __future__ import annotations

import httpx
import pytest

from autoglm.cli.main import main
from autoglm.registry import DirectoryRegistry, RegistryError, base_checksum
from tests.server.live_server import start_server
from tests.lora.adapters import ADAPTER_SPECS, make_adapter
from tests.server.model_versions import MODEL, PROMPT, complete, make_registry

SPEC = ADAPTER_SPECS["everything"]  # rank 16 on attention and MLP, rsLoRA
ADAPTER = "sql"


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> DirectoryRegistry:
    """MODEL 1 and 2 (other weights); ADAPTER 1 and 2 on MODEL@1, and 3 on MODEL@2."""
    folder = tmp_path_factory.mktemp("adapter-registry")
    registry = DirectoryRegistry(make_registry(folder))
    bases = {version: registry.version(MODEL, version) for version in ("1", "2")}
    for seed, base in ((1, "1"), (2, "1"), (3, "2")):
        adapter = make_adapter(bases[base].path, folder / f"adapter-{seed}", SPEC, seed)
        registry.register(ADAPTER, adapter, base_sha256=base_checksum(registry, f"{MODEL}@{base}"))
    return registry


@pytest.fixture(scope="module")
def served(registry):
    running = start_server(registry.version(MODEL, "1").path, serve_models=(MODEL, ADAPTER),
                           registry_dir=str(registry.root), enable_lora=True, max_cpu_loras=4,
                           lora_modules={"notes": str(registry.version(ADAPTER, "1").path)})
    yield running
    running.stop()


def _operate(url: str, operation: str, **body: object) -> httpx.Response:
    return httpx.post(f"{url}/admin/models/{ADAPTER}/{operation}", json=body, timeout=60)


def test_an_adapter_is_registered_only_with_the_checksum_of_a_model_it_runs_on(registry, tmp_path):
    adapter = registry.version(ADAPTER, "1")
    assert adapter.base_sha256 == registry.version(MODEL, "1").sha256 and adapter.architecture == "LORA adapter"
    with pytest.raises(RegistryError, match=r"is a LoRA adapter .*register it with the base model version"):
        registry.register("unpinned", adapter.path)
    with pytest.raises(RegistryError, match=r"is a model checkpoint, not a LoRA adapter"):
        registry.register("pinned-model", registry.version(MODEL, "2").path, base_sha256=adapter.base_sha256)
    with pytest.raises(RegistryError, match=r"sql@1 is itself a LoRA adapter"):
        base_checksum(registry, f"{ADAPTER}@1")


def test_the_models_command_registers_an_adapter_on_the_base_it_names(registry, tmp_path, capsys):
    copied = DirectoryRegistry(tmp_path / "registry")
    copied.register(MODEL, registry.version(MODEL, "2").path)
    adapter = registry.version(ADAPTER, "3").path
    arguments = ["--registry-dir", str(copied.root)]
    assert main(["models", "register", ADAPTER, str(adapter), "--base", MODEL, *arguments]) == 0
    assert "LORA adapter" in capsys.readouterr().out
    assert copied.version(ADAPTER, "1").base_sha256 == copied.version(MODEL, "1").sha256
    assert main(["models", "register", "unpinned", str(adapter), *arguments]) != 0
    assert "register it with the base model version it runs on (--base NAME@VERSION)" in capsys.readouterr().err


def test_the_adapter_serves_on_its_base_and_lists_it_as_parent(served):
    base_text = complete(served.url)["choices"][0]["text"]
    answer = complete(served.url, model=ADAPTER)
    assert answer["model"] == f"{ADAPTER}@1" and answer["choices"][0]["text"] != base_text
    cards = {card["id"]: card for card in httpx.get(served.url + "/v1/models", timeout=10).json()["data"]}
    assert cards[ADAPTER]["parent"] == MODEL and cards[f"{ADAPTER}@1"]["parent"] == ADAPTER


def test_promote_canary_and_rollback_move_an_adapter_between_its_versions(served):
    first = complete(served.url, model=ADAPTER)["choices"][0]["text"]
    assert _operate(served.url, "promote", version="2").status_code == 200
    promoted = complete(served.url, model=ADAPTER)
    assert promoted["model"] == f"{ADAPTER}@2" and promoted["choices"][0]["text"] != first
    assert _operate(served.url, "canary", version="1", percent=100).status_code == 200
    assert complete(served.url, model=ADAPTER, user="anyone")["model"] == f"{ADAPTER}@1"
    assert _operate(served.url, "canary", version="1", percent=0).status_code == 200
    assert _operate(served.url, "rollback").status_code == 200
    rolled_back = complete(served.url, model=ADAPTER)
    assert rolled_back["model"] == f"{ADAPTER}@1" and rolled_back["choices"][0]["text"] == first


def test_an_adapter_pinned_to_other_base_weights_is_refused_and_nothing_changes(served):
    refused = _operate(served.url, "load", version="3")
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "base_mismatch" and "no loaded model has those weights" in error["message"]
    assert complete(served.url, model=ADAPTER)["model"] == f"{ADAPTER}@1"
    assert httpx.post(served.url + "/v1/completions", json={"model": f"{ADAPTER}@3", "prompt": PROMPT},
                      timeout=10).status_code == 404


def test_an_adapter_loaded_by_name_serves_beside_the_registry_and_stays_out_of_its_models(served):
    assert complete(served.url, model="notes")["model"] == "notes"
    reported = httpx.get(served.url + "/admin/models", timeout=10).json()["models"]
    assert {entry["name"] for entry in reported} == {MODEL, ADAPTER}


def test_a_base_stays_loaded_while_adapters_run_on_it(served):
    """Last: it leaves MODEL@2 the stable."""
    assert httpx.post(f"{served.url}/admin/models/{MODEL}/promote", json={"version": "2"}, timeout=60).status_code == 200
    assert complete(served.url)["model"] == f"{MODEL}@2"
    assert complete(served.url, model=ADAPTER)["model"] == f"{ADAPTER}@1"
    refused = httpx.post(f"{served.url}/admin/models/{MODEL}/unload", json={"version": "1"}, timeout=60)
    assert refused.status_code == 409
    assert "the LoRA adapters notes, sql@1 run on tiny@1; unload them before it" in refused.json()["error"]["message"]
