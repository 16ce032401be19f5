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
from autoglm.server.openai.openapi import ROUTE_ERRORS
from autoglm.server.openai.schema_bounds import FIELD_BOUNDS
from tests.server.live_server import RunningServer, start_server
from tests.server.model_versions import serve_registry
from tests.server.tenants_files import TenantsFixture

ERROR_SCHEMA = {"$ref": "#/components/schemas/ErrorResponse"}
ANTHROPIC_ERROR_SCHEMA = {"$ref": "#/components/schemas/AnthropicError"}  # the Messages API's routes' errors
GENERATION_ROUTES = ("/v1/completions", "/v1/chat/completions")
# The fuzzer's budget: examples per operation, a fixed seed, one worker (see test_schema_fuzzer_...).
FUZZ_EXAMPLES = 10
FUZZ_SEED = 1
# Where a schema-valid body may still be refused, for rules JSON Schema cannot state: the prompt and
# max_tokens together within the context, one output constraint at most, a regex or grammar that compiles,
# token ids within the vocabulary of the model named, a previous response that is stored, an uploaded file that
# is JSONL text, a batch's file and endpoint that exist here, a pooling route's model that pools, a LoRA adapter in
# a folder the server may load from. Every other check runs on these too.
MIXED_RULES = ("^/(v1/((chat/)?completions|responses|messages(/count_tokens)?|files.*|batches.*|embeddings|rerank|score"
               "|(un)?load_lora_adapter)|v2/rerank|rerank|score|tokenize|detokenize)$")


@pytest.fixture(scope="module")
def document() -> dict:
    """The document of an app that has not loaded its model: it is read from the routes alone."""
    return build_app(AutoGLMConfig().server_config()).openapi()


@pytest.fixture(scope="module")
def full_document(tmp_path_factory) -> dict:
    """The document of an app with keys and a registry, so with the tenant and model admin routes too."""
    config = AutoGLMConfig(api_key="agk-openapi-test-key", serve_models=("tiny",),
                           registry_dir=str(tmp_path_factory.mktemp("registry")))
    return build_app(config.server_config()).openapi()


def error_schema(path: str) -> dict:
    return ANTHROPIC_ERROR_SCHEMA if path.startswith("/v1/messages") else ERROR_SCHEMA


def operations(document: dict):
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def test_invalid_input_is_documented_as_400_in_the_error_schema_not_fastapis_422(document):
    for path, method, operation in operations(document):
        assert "422" not in operation["responses"], (method, path)
        if "requestBody" in operation:
            assert operation["responses"]["400"]["content"]["application/json"]["schema"] == error_schema(path)
    assert not {"HTTPValidationError", "ValidationError"} & set(document["components"]["schemas"])
    assert {"message", "type", "param", "code"} == set(document["components"]["schemas"]["ErrorInfo"]["properties"])


def test_every_route_documents_its_errors_in_the_error_schema(full_document):
    assert set(full_document["paths"]) == set(ROUTE_ERRORS)  # a new route must say which errors it gives
    for path, method, operation in operations(full_document):
        for status in (*ROUTE_ERRORS[path], HTTPStatus.INTERNAL_SERVER_ERROR):
            assert operation["responses"][str(status.value)]["content"] == {
                "application/json": {"schema": error_schema(path)}}
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
    assert set(document["paths"]["/health"]) == {"get"}  # HEAD, implied by every GET, is not repeated


def test_health_metrics_and_streams_are_documented_as_sent(document):
    health = document["paths"]["/health"]["get"]["responses"]
    assert set(health["200"]["content"]) == {"application/json"} and set(health) == {"200", "500", "503"}
    assert "cpu_kernels" in health["200"]["content"]["application/json"]["schema"]["properties"]
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


def test_a_body_the_schema_allows_is_accepted_and_one_the_server_refuses_the_schema_refuses(server, document):
    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    assert httpx.post(server.url + "/v1/chat/completions", json={**chat, "modalities": []}, timeout=60).is_success
    schemas = document["components"]["schemas"]
    choice = schemas["CompletionRequest"]["properties"]["guided_choice"]
    assert (choice["minItems"], choice["items"]["minLength"]) == (1, 1)
    refused = httpx.post(server.url + "/v1/completions", json={"prompt": "Hi", "guided_choice": []}, timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "guided_choice"
    assert schemas["ChatCompletionRequest"]["properties"]["modalities"]["enum"] == [None, [], ["text"]]
    assert len(schemas["TokenizeRequest"]["oneOf"]) == 2


def test_the_priority_range_is_the_servers_setting():
    schemas = build_app(AutoGLMConfig(max_abs_priority=7).server_config()).openapi()["components"]["schemas"]
    priority = schemas["CompletionRequest"]["properties"]["priority"]
    assert (priority["minimum"], priority["maximum"]) == (-7, 7)


def just_outside(keywords: dict) -> list[float]:
    """Values the numeric keywords exclude, next to where they start excluding."""
    outside = [keywords["maximum"] + 1] if "maximum" in keywords else []
    if "minimum" in keywords:
        outside.append(keywords["minimum"] - 1)
    if "exclusiveMinimum" in keywords:
        outside.append(keywords["exclusiveMinimum"])
    return outside


@pytest.mark.parametrize("field", [field for field, keywords in FIELD_BOUNDS.items() if just_outside(keywords)])
def test_every_numeric_bound_the_schema_states_the_server_enforces(server, document, field):
    properties = document["components"]["schemas"]["CompletionRequest"]["properties"]
    route, body = "/v1/completions", {"prompt": "Hi", "max_tokens": 2}
    if field not in properties:  # a chat field
        route, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "logprobs": True}
    for value in just_outside(FIELD_BOUNDS[field]):
        answer = httpx.post(server.url + route, json={**body, field: value}, timeout=60)
        assert answer.status_code == 400, (field, value, answer.text)
        assert field in answer.json()["error"]["message"], (field, value)


def run_fuzzer(url: str, folder: Path, *options: str) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).parent / "schemathesis"), "run", f"{url}/openapi.json", "-n",
               str(FUZZ_EXAMPLES), "--seed", str(FUZZ_SEED), "-w", "1", "--checks", "all", *options]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def fuzzed_server(chat_model, tmp_path_factory) -> RunningServer:
    running = start_server(chat_model, max_context_len=64, request_timeout_s=30,
                           data_dir=str(tmp_path_factory.mktemp("fuzzed-data")))
    yield running
    running.stop()


@pytest.mark.timeout(120)
def test_schema_fuzzer_passes_every_check_on_the_routes_whose_rules_the_schema_states(fuzzed_server, tmp_path):
    result = run_fuzzer(fuzzed_server.url, tmp_path, "--exclude-path-regex", MIXED_RULES)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.timeout(120)
def test_schema_fuzzer_passes_every_check_on_the_admin_routes(registry_dir, tmp_path):
    """With an admin key, on a server with keys and a registry. Key revocation is left out: the fuzzer finds the
    key's id in /admin/tenants and revokes it."""
    tenants = TenantsFixture(tenants=[{"id": "ops", "role": "admin"}])
    key = tenants.add_key("ops-key", "ops")
    server = serve_registry(registry_dir, tenants_file=str(tenants.write(tmp_path / "tenants.yaml")))
    try:
        result = run_fuzzer(server.url, tmp_path, "--include-path-regex", "^/admin/(tenants|usage|reload|models)",
                            "--phases", "examples,coverage,fuzzing", "-H", f"Authorization: Bearer {key}")
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_schema_fuzzer_passes_every_other_check_on_the_generation_and_token_routes(fuzzed_server, tmp_path):
    result = run_fuzzer(fuzzed_server.url, tmp_path, "--include-path-regex", MIXED_RULES,
                        "--exclude-checks", "positive_data_acceptance")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
