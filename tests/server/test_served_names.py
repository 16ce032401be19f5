"""/v1/models' id is --served-model-name, else the checkpoint folder's name, never its path; requests name it."""
from __future__ import annotations

import httpx
import pytest

from autoglm.config import AutoGLMConfig
from autoglm.model_paths import DEFAULT_MODEL_NAME
from autoglm.server.versions.served_names import served_model_name, served_model_names


@pytest.mark.parametrize(("settings", "name"), [
    ({"model": "/srv/ckpt/tiny-qwen"}, "tiny-qwen"),
    ({"model": "/srv/ckpt/tiny-qwen/"}, "tiny-qwen"),
    ({"model": "/srv/ckpt/tiny-qwen", "served_model_name": "chat"}, "chat"),
    ({}, DEFAULT_MODEL_NAME),
])
def test_the_served_name_is_the_configured_one_else_the_folders(settings, name):
    assert served_model_name(AutoGLMConfig(**settings).server_config()) == name


def test_a_relative_folder_is_named_by_its_own_name(tmp_path, monkeypatch):
    (tmp_path / "tiny-qwen").mkdir()
    monkeypatch.chdir(tmp_path / "tiny-qwen")
    assert served_model_names(AutoGLMConfig(model=".").server_config()) == ("tiny-qwen",)


def test_a_server_without_a_served_name_lists_and_answers_the_folders_name(single_slot_server, chat_model):
    response = httpx.get(single_slot_server.url + "/v1/models")
    assert str(chat_model.parent) not in response.text
    assert [card["id"] for card in response.json()["data"]] == [chat_model.name]
    completion = httpx.post(single_slot_server.url + "/v1/completions", timeout=60,
                            json={"model": chat_model.name, "prompt": "Hi", "max_tokens": 2})
    assert completion.status_code == 200 and completion.json()["model"] == chat_model.name
