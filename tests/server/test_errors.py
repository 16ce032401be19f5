"""Every failure answered in OpenAI's shape with the right status, and the server still serving after."""
from __future__ import annotations

import json
import logging
import threading

import httpx
import openai
import pytest

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import InvalidRequestError
from autoglm.server.openai.errors import to_api_error
from tests.server.live_server import (
    BASE_SETTINGS,
    long_completion,
    slow_down_steps,
    sse_payloads,
    start_server,
    wait_for_health,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


def post(server, path: str, **kwargs) -> httpx.Response:
    return httpx.post(server.url + path, timeout=30, **kwargs)


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def assert_still_serving(server) -> None:
    assert httpx.get(server.url + "/health").status_code == 200
    assert post(server, "/v1/completions", json={"prompt": "Hello", "max_tokens": 2}).status_code == 200


@pytest.mark.parametrize("body, param, code, words", [
    ({"prompt": "Hello", "temperature": 3.0}, "temperature", "invalid_value", "temperature must be in [0, 2], got 3.0"),
    ({"prompt": "Hello", "top_p": 0}, "top_p", "invalid_value", "top_p must be in (0, 1]"),
    ({"prompt": "Hello", "n": 0}, "n", "invalid_value", "n must be in [1, 16]"),
    ({"prompt": "Hello", "logprobs": 50}, "logprobs", "invalid_value", "logprobs must be in [0, 20]"),
    ({"prompt": "Hello", "temperature": "hot"}, "temperature", "invalid_type",
     "temperature: Input should be a valid number"),
    ({"prompt": 42}, "prompt", "invalid_type",
     "prompt: expected str or list[str] or list[int] or list[list[int]] (got 42)"),
    ({"prompt": []}, "prompt", "invalid_value", "prompt: give at least one prompt"),
    ({"max_tokens": 4}, "prompt", "missing_required_parameter", "prompt: Field required"),
])
def test_invalid_completion_parameters_are_400(server, body, param, code, words):
    response = post(server, "/v1/completions", json=body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and (error["param"], error["code"]) == (param, code)
    assert words in error["message"]


def test_chat_parameters_are_named_as_the_request_names_them(server):
    messages = [{"role": "user", "content": "Hi"}]
    response = post(server, "/v1/chat/completions", json={"messages": messages, "logprobs": True, "top_logprobs": 99})
    assert error_of(response)["param"] == "top_logprobs" and "top_logprobs must be" in error_of(response)["message"]
    response = post(server, "/v1/chat/completions", json={"messages": messages, "max_completion_tokens": 0})
    assert error_of(response)["param"] == "max_completion_tokens"
    response = post(server, "/v1/chat/completions", json={"messages": messages, "top_logprobs": 2})
    assert response.status_code == 400 and "needs logprobs" in error_of(response)["message"]


def test_prompt_past_the_context_names_both_numbers(server):
    with pytest.raises(openai.BadRequestError) as caught:
        server.openai().completions.create(model="tiny-llama", prompt="Hello world", max_tokens=300)
    assert caught.value.status_code == 400
    message = caught.value.body["message"]
    assert "maximum context length is 256 tokens" in message and "300 in max_tokens" in message
    assert caught.value.body["code"] == "context_length_exceeded"


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize("content, code, words", [
    (b'{"prompt": ', "invalid_json", "the request body is not valid JSON: Expecting value"),
    (b"not json at all", "invalid_json", "the request body is not valid JSON: Expecting value"),
    (b"[1, 2]", "invalid_type", "the request body must be a JSON object, got an array"),
    (b'"hello"', "invalid_type", "the request body must be a JSON object, got a string"),
    (b"null", "invalid_type", "the request body must be a JSON object, got null"),
    (b"", "invalid_value", "invalid request body: Field required"),
])
def test_malformed_bodies_are_400_not_422(server, path, content, code, words):
    response = post(server, path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = error_of(response)
    assert (error["type"], error["code"], error["message"]) == ("invalid_request_error", code, words)


def test_unknown_model_is_404_and_served_or_missing_name_is_fine(server):
    with pytest.raises(openai.NotFoundError) as caught:
        server.openai().completions.create(model="gpt-4", prompt="Hello", max_tokens=2)
    assert caught.value.body["code"] == "model_not_found" and "gpt-4" in caught.value.body["message"]
    assert post(server, "/v1/completions", json={"model": "tiny-llama", "prompt": "Hi", "max_tokens": 1}).is_success
    assert post(server, "/v1/completions", json={"prompt": "Hi", "max_tokens": 1}).is_success


def test_refused_requests_are_logged_with_their_status(server, caplog):
    with caplog.at_level(logging.INFO, logger="autoglm.requests"):
        post(server, "/v1/completions", json={"prompt": "Hi", "temperature": 5})
        post(server, "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}], "model": "x"})
        post(server, "/v1/completions", json={"prompt": "Hi", "max_tokens": 1000})
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == "autoglm.requests"]
    assert [line["status"] for line in lines] == [400, 404, 400]
    assert lines[2]["prompt_tokens"] == 0 and lines[2]["finish_reason"] is None
    assert lines[0]["error"] == "temperature must be in [0, 2], got 5.0"
    assert "The model 'x' does not exist" in lines[1]["error"]
    assert "maximum context length is 256 tokens" in lines[2]["error"]


def test_full_waiting_queue_is_429_with_retry_after(single_slot_server, monkeypatch):
    server = single_slot_server
    slow_down_steps(server, monkeypatch)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        with client.stream("POST", "/v1/completions", json=long_completion(stream=True)) as running:
            lines = running.iter_lines()  # dropping this iterator would close the stream
            next(lines)  # the first request holds the only slot
            waiting = threading.Thread(target=post, args=(server, "/v1/completions"),
                                       kwargs={"json": {"prompt": "Hi", "max_tokens": 2}})
            waiting.start()
            assert wait_until(lambda: server.metrics()["autoglm:num_requests_waiting"] == 1)
            rejected = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2})
        waiting.join(timeout=30)
    assert rejected.status_code == 429 and rejected.headers["retry-after"] == "1"
    assert error_of(rejected)["type"] == "rate_limit_error"
    assert_still_serving(server)


def test_timeout_ends_the_request_with_an_error(chat_model, monkeypatch):
    server = start_server(chat_model, request_timeout_s=0.3)
    slow_down_steps(server, monkeypatch)
    try:
        response = post(server, "/v1/completions", json=long_completion())
        assert response.status_code == 504 and error_of(response)["code"] == "request_timeout"
        with httpx.stream("POST", server.url + "/v1/completions", json=long_completion(stream=True)) as streamed:
            events = sse_payloads(streamed)
        assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == "request_timeout"
        assert wait_until(lambda: server.metrics()["autoglm:kv_cache_usage_perc"] == 0.0)
    finally:
        server.stop()


def test_engine_failure_is_500_and_the_server_keeps_serving(server, monkeypatch):
    engine = server.state.engine.engine
    original_step, failures = engine.step, []

    def step_failing_once():
        if not failures:
            failures.append("injected")
            raise RuntimeError("injected fault")
        return original_step()

    monkeypatch.setattr(engine, "step", step_failing_once)
    response = post(server, "/v1/completions", json={"prompt": "Hello", "max_tokens": 2})
    assert response.status_code == 500
    assert error_of(response)["type"] == "server_error" and "injected fault" in error_of(response)["message"]
    assert_still_serving(server)
    assert server.metrics()["autoglm:kv_cache_usage_perc"] == 0.0


def test_only_invalid_requests_are_400_and_any_other_error_is_a_500_naming_the_request(caplog):
    assert to_api_error(InvalidRequestError("n must be in [1, 16], got 0"), "cmpl-7").status == 400
    with caplog.at_level(logging.ERROR, logger="autoglm.server.openai.errors"):
        bug = ValueError("zip() argument 2 is shorter than argument 1")
        error = to_api_error(bug, "cmpl-7")
    assert error.status == 500 and error.body.error.type == "server_error"
    assert "request cmpl-7" in error.body.error.message and "bug in the server" in error.body.error.message
    (record,) = caplog.records
    assert "cmpl-7" in record.getMessage() and record.exc_info[1] is bug


def test_an_unexpected_value_error_in_the_engine_is_500_and_the_server_keeps_serving(server, monkeypatch, caplog):
    engine = server.state.engine.engine
    original_add, failures = engine.add_request, []

    def add_failing_once(*args, **kwargs):
        if not failures:
            failures.append("injected")
            raise ValueError("injected defect")
        return original_add(*args, **kwargs)

    monkeypatch.setattr(engine, "add_request", add_failing_once)
    with caplog.at_level(logging.INFO):
        response = post(server, "/v1/completions", json={"prompt": "Hello", "max_tokens": 2})
    assert response.status_code == 500
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "autoglm.requests"]
    message = error_of(response)["message"]
    assert f"request {line['request_id']}" in message and "injected defect" in message and "bug" in message
    assert any(r.exc_info and "injected defect" in str(r.exc_info[1]) for r in caplog.records)
    assert_still_serving(server)


def test_health_is_503_while_loading_and_after_the_engine_loop_dies(chat_model, monkeypatch):
    release = threading.Event()
    config = AutoGLMConfig(model=str(chat_model), **BASE_SETTINGS)

    def slow_load() -> LLMEngine:
        release.wait(30)
        return LLMEngine(config.engine_config())

    server = start_server(chat_model, load_engine=slow_load, wait_ready=False)
    try:
        response = post(server, "/v1/completions", json={"prompt": "Hi", "max_tokens": 1})
        assert response.status_code == 503 and "loading" in error_of(response)["message"]
        release.set()
        wait_for_health(server.url, 200)
        assert_still_serving(server)

        def broken() -> bool:
            raise RuntimeError("injected crash")

        monkeypatch.setattr(server.state.engine.engine, "has_unfinished_requests", broken)
        response = post(server, "/v1/completions", json={"prompt": "Hi", "max_tokens": 1})
        assert response.status_code == 503
        assert httpx.get(server.url + "/health").status_code == 503
        assert error_of(post(server, "/v1/completions", json={"prompt": "Hi"})).get("code") == "engine_not_running"
    finally:
        server.stop()
