"""Tenants' rate limits and quotas against a live server, through the openai client and httpx.

Each limit in turn: the request that crosses it gets 429 in OpenAI's shape with Retry-After and
the x-ratelimit-* headers, and a request after Retry-After succeeds. The server's windows are
shortened (a 'minute' of 2 seconds, a 'day' of 3) so waiting out a refusal takes a moment.
"""
from __future__ import annotations

import re
import time

import httpx
import openai
import pytest

from autoglm.server.tenants.rate_limits import LimitWindows
from tests.server.live_server import long_completion, slow_down_steps, sse_payloads, start_server, wait_until
from tests.server.tenants_files import TenantsFixture

MODEL = "tiny-llama"
WINDOWS = LimitWindows(minute_s=2, day_s=3)
TENANTS = {
    "rpm": {"requests_per_minute": 2},
    "tpm": {"tokens_per_minute": 30},
    "concurrent": {"max_concurrent_requests": 1},
    "daily": {"tokens_per_day": 20},
    "capped": {"max_tokens_cap": 5},
    "reported": {"requests_per_minute": 100, "tokens_per_minute": 10_000},
    "unlimited": {},
}
RATE_LIMIT_HEADERS = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
                      "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens")
DURATION = re.compile(r"(\d+h)?(\d+m)?\d+(ms|s)")

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": name, "limits": limits} for name, limits in TENANTS.items()])
    for name in TENANTS:
        fixture.add_key(name, name)
    return fixture


@pytest.fixture(scope="module")
def limited_server(chat_model, tenants, tmp_path_factory):
    path = tenants.write(tmp_path_factory.mktemp("tenants") / "tenants.yaml")
    running = start_server(chat_model, served_model_name=MODEL, tenants_file=str(path), limit_windows=WINDOWS)
    yield running
    running.stop()


def complete(server, key: str, **body: object) -> httpx.Response:
    return httpx.post(server.url + "/v1/completions", headers={"Authorization": f"Bearer {key}"}, timeout=60,
                      json={"model": MODEL, "prompt": "Hi", "max_tokens": 1, **body})


def assert_refused(response: httpx.Response, error_type: str, *named: str) -> float:
    """A 429 in OpenAI's shape naming the limit; returns its Retry-After."""
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == (error_type, "rate_limit_exceeded")
    for text in named:
        assert text in error["message"]
    retry = int(response.headers["retry-after"])
    assert 1 <= retry <= WINDOWS.day_s
    return retry


def test_requests_per_minute(limited_server, tenants):
    key = tenants.keys["rpm"]
    assert [complete(limited_server, key).status_code for _ in range(2)] == [200, 200]
    refused = complete(limited_server, key)
    retry = assert_refused(refused, "requests", "requests_per_minute", "limit 2", "Try again in")
    assert refused.headers["x-ratelimit-limit-requests"] == "2"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    time.sleep(retry)
    assert complete(limited_server, key).status_code == 200


def test_tokens_per_minute_counts_streamed_completion_tokens(limited_server, tenants):
    key = tenants.keys["tpm"]
    prompt_only = complete(limited_server, key, max_tokens=1).json()["usage"]
    assert prompt_only["prompt_tokens"] < 10, "the prompt alone is far from the budget of 30"
    # The stream crosses the budget and still finishes; its overage is charged to what follows.
    with httpx.stream("POST", limited_server.url + "/v1/completions", headers={"Authorization": f"Bearer {key}"},
                      json=long_completion(model=MODEL, prompt="Hi", max_tokens=40, stream=True), timeout=60) as stream:
        payloads = sse_payloads(stream)
    assert payloads[-1] == "[DONE]" and '"finish_reason":"length"' in payloads[-2]
    refused = complete(limited_server, key)
    retry = assert_refused(refused, "tokens", "tokens_per_minute", "limit 30")
    assert refused.headers["x-ratelimit-remaining-tokens"] == "0"
    time.sleep(retry)
    assert complete(limited_server, key).status_code == 200


def test_the_daily_token_quota(limited_server, tenants):
    key = tenants.keys["daily"]
    assert complete(limited_server, key, max_tokens=25, ignore_eos=True).status_code == 200
    retry = assert_refused(complete(limited_server, key), "tokens", "tokens per day", "tokens_per_day", "limit 20")
    time.sleep(retry)
    assert complete(limited_server, key).status_code == 200


def test_concurrent_requests_and_their_slot_given_back_however_they_end(limited_server, tenants, monkeypatch):
    key = tenants.keys["concurrent"]
    slow_down_steps(limited_server, monkeypatch)
    body = long_completion(model=MODEL, max_tokens=100, stream=True)
    with httpx.stream("POST", limited_server.url + "/v1/completions", headers={"Authorization": f"Bearer {key}"},
                      json=body, timeout=60) as stream:
        lines = stream.iter_lines()
        next(lines)  # admitted, and generating
        refused = complete(limited_server, key)
        assert_refused(refused, "requests", "max_concurrent_requests is 1")
        lines.close()  # the client goes away mid-stream: its slot comes back
    assert wait_until(lambda: complete(limited_server, key).status_code == 200)
    assert complete(limited_server, key).status_code == 200, "a finished request gives its slot back"


def test_a_request_over_the_max_tokens_cap_is_400_naming_it(limited_server, tenants):
    client = openai.OpenAI(base_url=limited_server.url + "/v1", api_key=tenants.keys["capped"], max_retries=0)
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model=MODEL, prompt="Hi", max_tokens=6)
    assert raised.value.param == "max_tokens"
    assert "max_tokens is 6" in raised.value.message and "cap of 5" in raised.value.message
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                       max_completion_tokens=9)
    assert raised.value.param == "max_completion_tokens"


def test_a_request_without_max_tokens_gets_the_cap(limited_server, tenants):
    client = openai.OpenAI(base_url=limited_server.url + "/v1", api_key=tenants.keys["capped"], max_retries=0)
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                          extra_body={"ignore_eos": True})
    assert chat.usage.completion_tokens == 5
    # Completions default to 16 tokens, above this cap.
    completion = client.completions.create(model=MODEL, prompt="Hi", extra_body={"ignore_eos": True})
    assert completion.usage.completion_tokens == 5


@pytest.mark.parametrize("request_kind", ["completion", "stream", "bad request", "models", "tokenize"])
def test_every_answer_to_a_limited_tenant_carries_the_headers(limited_server, tenants, request_kind):
    headers = {"Authorization": f"Bearer {tenants.keys['reported']}"}
    url = limited_server.url
    if request_kind == "stream":
        with httpx.stream("POST", url + "/v1/completions", headers=headers, timeout=60,
                          json={"model": MODEL, "prompt": "Hi", "max_tokens": 3, "stream": True}) as response:
            response.read()
    elif request_kind == "models":
        response = httpx.get(url + "/v1/models", headers=headers)
    elif request_kind == "tokenize":
        response = httpx.post(url + "/tokenize", headers=headers, json={"prompt": "Hi"})
    else:
        body = {"model": MODEL, "prompt": "Hi", "max_tokens": 3}
        if request_kind == "bad request":
            body["temperature"] = "hot"
        response = httpx.post(url + "/v1/completions", headers=headers, json=body)
    assert response.status_code == (400 if request_kind == "bad request" else 200)
    assert response.headers["x-ratelimit-limit-requests"] == "100"
    assert response.headers["x-ratelimit-limit-tokens"] == "10000"
    assert int(response.headers["x-ratelimit-remaining-requests"]) < 100 or request_kind != "completion"
    assert int(response.headers["x-ratelimit-remaining-tokens"]) < 10_000 or request_kind != "completion"
    assert DURATION.fullmatch(response.headers["x-ratelimit-reset-requests"])
    assert DURATION.fullmatch(response.headers["x-ratelimit-reset-tokens"])


def test_a_generation_counts_a_request_and_its_tokens_and_tokenizing_does_not(limited_server, tenants):
    headers = {"Authorization": f"Bearer {tenants.keys['reported']}"}
    before = httpx.post(limited_server.url + "/tokenize", headers=headers, json={"prompt": "Hi"}).headers
    after_tokenize = httpx.post(limited_server.url + "/tokenize", headers=headers, json={"prompt": "Hi"}).headers
    assert after_tokenize["x-ratelimit-remaining-requests"] == before["x-ratelimit-remaining-requests"]
    usage = complete(limited_server, tenants.keys["reported"], max_tokens=4, ignore_eos=True)
    remaining_requests = int(usage.headers["x-ratelimit-remaining-requests"])
    assert remaining_requests == int(before["x-ratelimit-remaining-requests"]) - 1
    # The generated tokens are counted by the time the answer is out.
    spent = usage.json()["usage"]["total_tokens"]
    after = httpx.post(limited_server.url + "/tokenize", headers=headers, json={"prompt": "Hi"}).headers
    assert int(after["x-ratelimit-remaining-tokens"]) == int(before["x-ratelimit-remaining-tokens"]) - spent


def test_a_tenant_without_limits_gets_no_rate_limit_headers(limited_server, tenants):
    response = complete(limited_server, tenants.keys["unlimited"])
    assert response.status_code == 200
    assert not set(RATE_LIMIT_HEADERS) & set(response.headers)
