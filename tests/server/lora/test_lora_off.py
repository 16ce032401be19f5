"""A server started without enable_lora refuses to load adapters, saying which setting serves them."""
from __future__ import annotations

import httpx


def test_loading_an_adapter_without_enable_lora_names_the_setting(server):
    refused = httpx.post(server.url + "/v1/load_lora_adapter", json={"lora_name": "sql", "lora_path": "sql"},
                         timeout=10)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "lora_not_enabled" and "start the server with enable_lora" in error["message"]
