"""The OpenAPI document says what the server answers, and a schema fuzzer finds no answer that contradicts it."""
from __future__ import annotations

import subprocess
import sys
from http import HTTPStatus
from pathlib import Path

import httpx
import pytest

from autoglm.config import AutoGLMConfig
from autoglm.server.app import build_app
from autoglm.server.openapi import ROUTE_ERRORS
from tests.server.live_server import start_server

ERROR_SCHEMA = {"$ref": "#/components/schemas/ErrorResponse"}
GENERATION_ROUTES = ("/v1/completions", "/v1/chat/completions")
# The fuzzer's budget: examples per operation, a fixed seed, one worker (see test_schema_fuzzer_...).
FUZZ_EXAMPLES = 10
FUZZ_SEED = 1
# What the fuzzer checks: no 5xx, and every status, content type, header and body as documented.
# (Its other checks ask a schema-valid request to succeed, but the schema cannot say every range:
# a priority past max_abs_priority is a well-formed integer and rightly a 400.)
FUZZ_CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
               "response_headers_conformance", "response_schema_conformance")


@pytest.fixture(scope="module")
def document() -> dict:
    """The document of an app that has not loaded its model: it is read from the routes alone."""
    return build_app(AutoGLMConfig()).openapi()


@pytest.fixture(scope="module")
def full_document(tmp_path_factory) -> dict:
    """The document of an app with keys and a registry, so with the tenant and model admin routes too."""
    config = AutoGLMConfig(api_key="agk-openapi-test-key", serve_models=("tiny",),
                           registry_dir=str(tmp_path_factory.mktemp("registry")))
    return build_app(config).openapi()


def operations(document: dict):
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def test_invalid_input_is_documented_as_400_in_the_error_schema_not_fastapis_422(document):
    for path, method, operation in operations(document):
        assert "422" not in operation["responses"], (method, path)
        if "requestBody" in operation:
            assert operation["responses"]["400"]["content"]["application/json"]["schema"] == ERROR_SCHEMA
    assert not {"HTTPValidationError", "ValidationError"} & set(document["components"]["schemas"])
    assert {"message", "type", "param", "code"} == set(document["components"]["schemas"]["ErrorInfo"]["properties"])


def test_every_route_documents_its_errors_in_the_error_schema(full_document):
    assert set(full_document["paths"]) == set(ROUTE_ERRORS)  # a new route must say which errors it gives
    for path, method, operation in operations(full_document):
        for status in (*ROUTE_ERRORS[path], HTTPStatus.INTERNAL_SERVER_ERROR):
            assert operation["responses"][str(status.value)]["content"] == {"application/json": {"schema": ERROR_SCHEMA}}
    for path in GENERATION_ROUTES:
        answers = full_document["paths"][path]["post"]["responses"]
        assert {"200", "400", "401", "403", "404", "413", "429", "500", "503", "504"} == set(answers)
        assert "Retry-After" in answers["429"]["headers"]
    promote = full_document["paths"]["/admin/models/{name}/promote"]["post"]["responses"]
    assert {"200", "400", "401", "403", "404", "409", "413", "422", "500"} == set(promote)
    assert {"200", "400", "401", "403", "500"} == set(full_document["paths"]["/admin/reload"]["post"]["responses"])
    operation_ids = [operation["operationId"] for _, _, operation in operations(full_document)]
    assert len(operation_ids) == len(set(operation_ids))


def test_options_on_health_is_405_allowing_get_and_head_as_documented(server, document):
    answer = httpx.options(server.url + "/health", timeout=10)
    assert answer.status_code == 405
    assert {method.strip() for method in answer.headers["allow"].split(",")} == {"GET", "HEAD"}
    assert set(document["paths"]["/health"]) == {"get", "head"}


def test_health_metrics_and_streams_are_documented_as_sent(document):
    health = document["paths"]["/health"]["get"]["responses"]
    assert "content" not in health["200"] and set(health) == {"200", "500", "503"}
    assert set(document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    for path, model in zip(GENERATION_ROUTES, ("CompletionResponse", "ChatCompletionResponse")):
        content = document["paths"][path]["post"]["responses"]["200"]["content"]
        assert set(content) == {"application/json", "text/event-stream"}
        assert content["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}
        assert model in document["components"]["schemas"]


def test_request_schemas_refuse_unknown_fields_as_the_server_does(document):
    schemas = document["components"]["schemas"]
    for name in ("CompletionRequest", "ChatCompletionRequest", "ChatMessage", "TokenizeRequest"):
        assert schemas[name]["additionalProperties"] is False, name


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_schema_fuzzer_finds_no_server_error_and_no_answer_the_document_does_not_allow(chat_model, tmp_path):
    server = start_server(chat_model, max_context_len=64, request_timeout_s=30)
    command = [str(Path(sys.executable).parent / "schemathesis"), "run", f"{server.url}/openapi.json",
               "-n", str(FUZZ_EXAMPLES), "--seed", str(FUZZ_SEED), "-w", "1", "--checks", ",".join(FUZZ_CHECKS)]
    try:
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_a_body_the_schema_allows_is_accepted_and_one_the_server_refuses_the_schema_refuses(server, document):
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    assert httpx.post(server.url + "/v1/chat/completions", json={**chat, "modalities": []}, timeout=60).is_success
    choice = document["components"]["schemas"]["CompletionRequest"]["properties"]["guided_choice"]
    assert (choice["minItems"], choice["items"]["minLength"]) == (1, 1)
    refused = httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "guided_choice": []}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "guided_choice"
