"""lora_modules and allowed_lora_path as settings, where a runtime adapter may be loaded from, and how the
engine's adapter errors are answered."""
from __future__ import annotations

from http import HTTPStatus
from types import SimpleNamespace

import pytest
from starlette.requests import Request

from autoglm.cli.main import build_parser
from autoglm.cli.settings import config_from_args
from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.errors import LoRAAdapterNotFoundError, LoRACapacityError
from autoglm.server.lora.adapter_paths import allowed_adapter_folder
from autoglm.server.lora.routes import check_admin_of_one_replica
from autoglm.server.openai.errors import APIError, to_api_error
from autoglm.server.versions.served_names import served_model_names


@pytest.mark.parametrize("given", [
    ["sql=/adapters/sql", "chat=/adapters/chat"],
    "sql=/adapters/sql, chat=/adapters/chat",
    ['{"name": "sql", "path": "/adapters/sql"}', "chat=/adapters/chat"],
    {"sql": "/adapters/sql", "chat": "/adapters/chat"},
    '{"sql": "/adapters/sql", "chat": "/adapters/chat"}',
])
def test_lora_modules_read_as_vllm_writes_them_or_as_a_mapping(given):
    config = AutoGLMConfig(lora_modules=given).server_config()
    assert config.adapters.lora_modules == {"sql": "/adapters/sql", "chat": "/adapters/chat"}


@pytest.mark.parametrize("given, complaint", [
    (["sql"], r"'sql' is not an adapter entry; expected NAME=PATH"),
    (["=/adapters/sql"], r"needs a name and a folder"),
    (["sql=/a", "sql=/b"], r"'sql' is given twice"),
    ('{"sql": ', r"expected a JSON object"),
    (7, r"expected NAME=PATH entries or a mapping"),
    (['{"name": "sql", "base_model_name": "m"}'], r"has the keys name and path, got name, base_model_name"),
])
def test_a_bad_lora_modules_entry_is_named(given, complaint):
    with pytest.raises(ConfigError, match=complaint):
        AutoGLMConfig(lora_modules=given)


def test_allowed_lora_path_must_be_a_folder(tmp_path):
    with pytest.raises(ConfigError, match=r"is not a folder; give an existing folder POST /v1/load_lora_adapter"):
        AutoGLMConfig(allowed_lora_path=str(tmp_path / "missing"))


def test_runtime_loading_is_off_without_allowed_lora_path():
    with pytest.raises(APIError) as refused:
        allowed_adapter_folder("/adapters/sql", None)
    assert refused.value.status == HTTPStatus.BAD_REQUEST
    assert "set allowed_lora_path" in refused.value.body.error.message


def test_adapter_paths_resolve_under_allowed_lora_path(tmp_path):
    allowed = tmp_path / "adapters"
    (allowed / "sql").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (allowed / "link").symlink_to(tmp_path / "elsewhere")
    assert allowed_adapter_folder("sql", str(allowed)) == (allowed / "sql").resolve()
    assert allowed_adapter_folder(str(allowed / "sql"), str(allowed)) == (allowed / "sql").resolve()
    for outside in ("../elsewhere", str(tmp_path / "elsewhere"), "link", "/etc"):
        with pytest.raises(APIError, match="outside allowed_lora_path") as refused:
            allowed_adapter_folder(outside, str(allowed))
        assert refused.value.body.error.code == "lora_path_not_allowed"


def test_engine_adapter_errors_answer_as_the_api_says():
    missing = to_api_error(LoRAAdapterNotFoundError("no adapter 'sql' is loaded"))
    assert (missing.status, missing.body.error.code, missing.body.error.param) == (
        HTTPStatus.NOT_FOUND, "model_not_found", "model")
    full = to_api_error(LoRACapacityError("max_cpu_loras=2 adapters are loaded and all are busy"))
    assert full.status == HTTPStatus.SERVICE_UNAVAILABLE and full.headers == {"Retry-After": "1"}


def test_lora_modules_count_as_served_models_for_the_tenants_file_warning():
    config = AutoGLMConfig(served_model_name="base", lora_modules={"sql": "/adapters/sql"}).server_config()
    assert served_model_names(config) == ("base", "sql")


def test_runtime_adapters_are_refused_on_an_application_of_several_replicas():
    app = SimpleNamespace(state=SimpleNamespace(single_replica=False))
    request = Request({"type": "http", "app": app, "client": ("127.0.0.1", 50000), "headers": []})
    with pytest.raises(APIError, match="serve adapters with lora_modules, which every replica loads") as refused:
        check_admin_of_one_replica(request)
    assert refused.value.status == HTTPStatus.NOT_IMPLEMENTED


def test_the_serve_command_takes_lora_modules_as_vllm_writes_them():
    arguments = build_parser().parse_args(["serve", "--lora-modules", "sql=/adapters/sql", "chat=/adapters/chat"])
    assert config_from_args(arguments).lora_modules == {"sql": "/adapters/sql", "chat": "/adapters/chat"}
