"""A batch's lines as read (each refusal named, the endpoints a line may name in one place), the usage a line
adds, whom its lines run as, and the routes on an application of several replicas: no server needed."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from autoglm.config import AutoGLMConfig
from autoglm.server.app import build_app
from autoglm.server.batches.endpoints import BATCH_ENDPOINTS, BatchEndpoints
from autoglm.server.batches.line_checks import RefusedLine, TooManyLines, read_lines
from autoglm.server.batches.principals import line_principal
from autoglm.server.batches.records import BatchRecord, BatchStatus, LineRequest
from autoglm.server.batches.results import TokenUsage, usage_of
from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.file import StoredKey, Tenant, TenantsFile, utc_now
from autoglm.server.tenants.keyring import KeyRing, Principal
from autoglm.server.tenants.keys import hash_key
from tests.server.batches.batch_files import chat_line

SERVED = BatchEndpoints(("/v1/chat/completions", "/v1/completions"))


def read(*lines: object, endpoints: BatchEndpoints = SERVED, max_lines: int = 10):
    return read_lines([line if isinstance(line, str) else json.dumps(line) for line in lines], endpoints, max_lines)


def refusal(line: object, endpoints: BatchEndpoints = SERVED) -> dict:
    (refused,) = read(line, endpoints=endpoints)
    assert isinstance(refused, RefusedLine) and refused.line == 1
    return refused.result.entry


def test_a_valid_line_is_kept_to_run_with_its_body_as_json_text():
    (line,) = read(chat_line("a", priority=3))
    assert line == LineRequest(1, "a", "/v1/chat/completions", json.dumps(chat_line("a", priority=3)["body"]))


def test_each_problem_of_a_line_is_refused_with_its_code_and_a_message_naming_it():
    assert refusal("{not json")["error"] == {
        "code": "invalid_json", "line": 1,
        "message": "line 1 is not valid JSON: Expecting property name enclosed in double quotes at column 2"}
    assert refusal("[1, 2]")["error"]["code"] == "invalid_request"
    assert refusal({**chat_line(""), "custom_id": 7})["error"]["code"] == "missing_custom_id"
    cases = {
        "unknown_parameter": ({**chat_line("a"), "header": {}}, "unknown field 'header'"),
        "invalid_method": ({**chat_line("a"), "method": "GET"}, "method must be \"POST\", got 'GET'"),
        "invalid_url": ({**chat_line("a"), "url": "/v1/moderations"},
                        "url '/v1/moderations' is not an endpoint a batch may name; allowed: /v1/chat/completions, "
                        "/v1/completions"),
        "invalid_body": ({**chat_line("a"), "body": "Hi"}, "body must be a JSON object"),
        "stream_unsupported": (chat_line("a", stream=True), "a batch line cannot stream"),
    }
    for code, (line, words) in cases.items():
        refused = refusal(line)
        assert refused["custom_id"] == "a" and refused["response"] is None
        assert refused["error"]["code"] == code and words in refused["error"]["message"], code


def test_a_repeated_custom_id_stays_its_first_lines_and_the_repeat_is_named_by_its_line():
    first, again = read(chat_line("a"), "  ", chat_line("a"))  # a blank line is skipped, yet counted
    assert isinstance(first, LineRequest) and first.custom_id == "a"
    assert again.line == 3 and again.result.entry["custom_id"] is None
    assert again.result.entry["error"] == {"code": "duplicate_custom_id", "line": 3, "message": (
        "line 3 repeats the custom_id 'a' of line 1; custom_ids must be unique in a batch, and this line was not run")}


def test_every_supported_endpoint_is_refused_as_not_served_until_the_app_mounts_it():
    assert set(BATCH_ENDPOINTS) == {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses",
                                    "/v1/embeddings"}
    for endpoint in ("/v1/messages", "/v1/responses"):
        refused = refusal({**chat_line("a"), "url": endpoint})["error"]
        assert refused["code"] == "unsupported_endpoint"
        assert f"{endpoint} is not served by this server" in refused["message"]
        assert isinstance(read({**chat_line("a"), "url": endpoint}, endpoints=BatchEndpoints((endpoint,)))[0],
                          LineRequest)


def test_a_file_past_the_line_limit_is_refused_whole():
    with pytest.raises(TooManyLines, match="more than 2 requests.*max_file_lines"):
        read(chat_line("a"), chat_line("b"), chat_line("c"), max_lines=2)


def test_a_lines_usage_is_read_in_chat_completions_responses_and_messages_names():
    chat = {"usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 3}}}
    responses = {"usage": {"input_tokens": 5, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 3}}}
    messages = {"usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 3}}
    for body in (chat, responses, messages):
        assert usage_of(body) == TokenUsage(input=5, cached=3, output=2)
    assert usage_of("not json") == usage_of({"usage": None}) == TokenUsage()


def test_files_and_batches_answer_501_on_an_application_of_several_replicas():
    app = build_app(AutoGLMConfig().server_config(), single_replica=False)
    client = TestClient(app, base_url="http://localhost")
    for method, path in (("GET", "/v1/files"), ("GET", "/v1/batches/batch_1"), ("POST", "/v1/batches/batch_1/cancel")):
        answer = client.request(method, path)
        assert answer.status_code == 501, (method, path)
        assert "ray_max_replicas: 1" in answer.json()["error"]["message"]


def test_a_batchs_lines_run_as_its_key_looked_up_again_as_each_runs():
    tenant = Tenant(id="team")
    key = StoredKey(id="k-1", tenant="team", hash=hash_key("agk-secret"), created=utc_now())
    batch = BatchRecord(id="batch_1", owner="team", key_id="k-1", endpoint="/v1/completions", input_file_id="file-1",
                        completion_window="24h", metadata=None, status=BatchStatus.IN_PROGRESS, created_at=0,
                        expires_at=1)
    keyring = KeyRing(TenantsFile(tenants=(tenant,), keys=(key,)))
    assert line_principal(keyring, batch) == Principal(tenant, tenant.role, "k-1")
    keyring.tenants = keyring.tenants.with_key_revoked("k-1")
    with pytest.raises(APIError, match="'k-1' has been revoked") as refused:
        line_principal(keyring, batch)
    assert refused.value.status == 401
    assert line_principal(None, batch) is None  # a server without keys now: anyone may
    with pytest.raises(APIError, match="made while this server had no keys"):
        line_principal(keyring, replace(batch, key_id=None))


def test_a_405_on_a_path_of_several_routes_allows_the_methods_of_all_of_them(tmp_path):
    client = TestClient(build_app(AutoGLMConfig(data_dir=str(tmp_path)).server_config()), base_url="http://localhost")
    for path, allowed in (("/v1/files", "GET, HEAD, POST"), ("/v1/files/file-1", "DELETE, GET, HEAD"),
                          ("/v1/batches", "GET, HEAD, POST")):
        answer = client.put(path)
        assert (answer.status_code, answer.headers["allow"]) == (405, allowed), path
