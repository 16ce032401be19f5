"""Tenants' rate limits and quotas against a live server, through the openai client and httpx.

Each limit in turn: the request that crosses it gets 429 in OpenAI's shape with Retry-After and
the x-ratelimit-* headers, and a request after Retry-After succeeds. The server's windows are cut
from a clock the tests move by hand, so waiting out a refusal takes no time and no outcome depends
on the machine's speed.
"""
from __future__ import annotations

import re

import httpx
import openai
import pytest

from autoglm.server.tenants.rate_limits import LimitWindows
from tests.server.live_server import long_completion, slow_down_steps, start_server, wait_until
from tests.server.manual_clock import ManualClock
from tests.server.tenants_files import TenantsFixture

MODEL = "tiny-llama"
CLOCK = ManualClock()
WINDOWS = LimitWindows(clock=CLOCK)
EOS = 2  # the tiny tokenizer's: a logit bias on it ends a completion at its first token
HI_TOKENS = 2  # "Hi" has two tokens
TENANTS = {
    "rpm": {"requests_per_minute": 2},
    "tpm": {"tokens_per_minute": 30},
    "concurrent": {"max_concurrent_requests": 1},
    "daily": {"tokens_per_day": 20},
    "rpd": {"requests_per_day": 2},
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


def remaining_tokens(server, key: str) -> int:
    """What is left of the tenant's tokens this minute, read from a /tokenize answer (which spends none)."""
    answer = httpx.post(server.url + "/tokenize", headers={"Authorization": f"Bearer {key}"}, json={"prompt": "Hi"})
    return int(answer.headers["x-ratelimit-remaining-tokens"])


def assert_refused(response: httpx.Response, error_type: str, *named: str) -> int:
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
    CLOCK.advance(retry - 1)
    assert complete(limited_server, key).status_code == 429, "the window has a second left"
    CLOCK.advance(1)
    assert complete(limited_server, key).status_code == 200


def test_requests_per_day_are_reported_in_the_request_headers_and_reset_with_the_day(limited_server, tenants):
    key = tenants.keys["rpd"]
    answers = [complete(limited_server, key) for _ in range(2)]
    assert [answer.status_code for answer in answers] == [200, 200]
    assert [answer.headers["x-ratelimit-remaining-requests"] for answer in answers] == ["1", "0"]
    retry = assert_refused(complete(limited_server, key), "requests", "requests per day", "requests_per_day",
                           "limit 2")
    assert retry > WINDOWS.minute_s, "the day's window, not a minute's"
    CLOCK.advance(WINDOWS.minute_s)
    assert complete(limited_server, key).status_code == 429, "a new minute is no new day"
    CLOCK.advance(retry)
    assert complete(limited_server, key).status_code == 200


def test_a_request_reserves_its_prompt_and_max_tokens_and_gets_back_what_it_did_not_use(limited_server, tenants):
    key = tenants.keys["tpm"]
    CLOCK.advance(WINDOWS.minute_s)  # a fresh window
    # 2 + 20 tokens reserved of 30: a second such request cannot fit beside it, wherever the first one is.
    with httpx.stream("POST", limited_server.url + "/v1/completions", headers={"Authorization": f"Bearer {key}"},
                      json=long_completion(model=MODEL, prompt="Hi", max_tokens=20, stream=True), timeout=60) as stream:
        lines = stream.iter_lines()
        next(lines)  # admitted
        retry = assert_refused(complete(limited_server, key, max_tokens=20), "tokens", "tokens_per_minute",
                               "limit 30, remaining 8")
        payloads = [line for line in lines if line.startswith("data: ")]
    assert payloads[-1] == "data: [DONE]"
    assert remaining_tokens(limited_server, key) == 30 - (HI_TOKENS + 20)
    # One that ends at its first token keeps 2 + 1 of the 2 + 6 it reserved: the other 5 come back.
    ended_early = complete(limited_server, key, max_tokens=6, logit_bias={str(EOS): 100})
    assert ended_early.json()["usage"]["completion_tokens"] == 1
    assert remaining_tokens(limited_server, key) == 30 - (HI_TOKENS + 20) - (HI_TOKENS + 1)
    CLOCK.advance(retry)
    assert remaining_tokens(limited_server, key) == 30
    assert complete(limited_server, key, max_tokens=20).status_code == 200


def test_a_client_gone_mid_stream_gets_back_what_was_not_generated(limited_server, tenants, monkeypatch):
    key = tenants.keys["tpm"]
    CLOCK.advance(WINDOWS.minute_s)
    slow_down_steps(limited_server, monkeypatch)  # 20 tokens take 20 steps: the client leaves long before
    with httpx.stream("POST", limited_server.url + "/v1/completions", headers={"Authorization": f"Bearer {key}"},
                      json=long_completion(model=MODEL, prompt="Hi", max_tokens=20, stream=True), timeout=60) as stream:
        lines = stream.iter_lines()
        next(lines)
        assert remaining_tokens(limited_server, key) == 30 - (HI_TOKENS + 20)
        lines.close()
    assert wait_until(lambda: remaining_tokens(limited_server, key) > 30 - (HI_TOKENS + 20))
    assert remaining_tokens(limited_server, key) <= 30 - (HI_TOKENS + 1), "the prompt and the tokens sent stay spent"


def test_a_request_larger_than_a_whole_window_is_400_naming_max_tokens(limited_server, tenants):
    client = openai.OpenAI(base_url=limited_server.url + "/v1", api_key=tenants.keys["tpm"], max_retries=0)
    with pytest.raises(openai.BadRequestError) as raised:
        client.completions.create(model=MODEL, prompt="Hi", max_tokens=10, n=3)
    assert raised.value.param == "max_tokens"
    assert "may use 32 tokens (2 in its prompt and 30 to generate: max_tokens for each of 3 sequences)" in (
        raised.value.message)
    assert "tokens_per_minute of 30" in raised.value.message and "at most 9 max_tokens" in raised.value.message
    # A chat request that sets no max_tokens may fill the context, more than this tenant's minute holds.
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}])
    assert raised.value.param == "max_tokens" and "ask for at most" in raised.value.message


def test_the_daily_token_quota(limited_server, tenants):
    key = tenants.keys["daily"]
    assert complete(limited_server, key, max_tokens=10, ignore_eos=True).status_code == 200
    retry = assert_refused(complete(limited_server, key, max_tokens=10), "tokens", "tokens per day",
                           "tokens_per_day", "limit 20, remaining 8")
    assert retry > WINDOWS.minute_s, "the day's window, not a minute's"
    CLOCK.advance(WINDOWS.minute_s)
    assert complete(limited_server, key, max_tokens=10).status_code == 429, "a new minute is no new day"
    CLOCK.advance(retry)
    assert complete(limited_server, key, max_tokens=10).status_code == 200


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
    # What the request used, and no more, is counted by the time the answer is out.
    spent = usage.json()["usage"]["total_tokens"]
    assert remaining_tokens(limited_server, tenants.keys["reported"]) == (
        int(before["x-ratelimit-remaining-tokens"]) - spent)


def test_a_tenant_without_limits_gets_no_rate_limit_headers(limited_server, tenants):
    response = complete(limited_server, tenants.keys["unlimited"])
    assert response.status_code == 200
    assert not set(RATE_LIMIT_HEADERS) & set(response.headers)
