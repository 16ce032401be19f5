"""A tenant whose `models` names nothing the server serves is said once at load and at each reload, naming
the tenant, its models and the served ones; a tenant allowed a served model, or every model, is not."""
from __future__ import annotations

import logging

import yaml

from autoglm.config import AutoGLMConfig
from autoglm.server.tenants.keyring import keyring_from_config

LOGGER = "autoglm.server.tenants.unserved_models"


def write_tenants(path, *tenants: dict[str, object]):
    path.write_text(yaml.safe_dump({"tenants": list(tenants)}))
    return path


def warnings_of(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def test_a_tenant_allowed_only_unserved_models_is_a_warning_at_load_and_reload(tmp_path, caplog):
    path = write_tenants(tmp_path / "tenants.yaml", {"id": "served", "models": ["tiny-qwen"]},
                         {"id": "everything"}, {"id": "lost", "models": ["qwen2.5-0.5b", "llama"]})
    config = AutoGLMConfig(model="/srv/ckpt/tiny-qwen", tenants_file=str(path)).server_config()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        keyring = keyring_from_config(config)
    [warning] = warnings_of(caplog)
    assert "tenant 'lost'" in warning and "qwen2.5-0.5b, llama" in warning and "serves tiny-qwen" in warning

    caplog.clear()
    write_tenants(path, {"id": "served", "models": ["elsewhere"]}, {"id": "lost", "models": ["tiny-qwen"]})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        keyring.reload()
    [warning] = warnings_of(caplog)
    assert "tenant 'served'" in warning and "only elsewhere" in warning


def test_the_served_name_counts_not_the_folder(tmp_path, caplog):
    path = write_tenants(tmp_path / "tenants.yaml", {"id": "team", "models": ["chat"]})
    config = AutoGLMConfig(model="/srv/ckpt/tiny-qwen", served_model_name="chat",
                           tenants_file=str(path)).server_config()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        keyring_from_config(config)
    assert warnings_of(caplog) == []
