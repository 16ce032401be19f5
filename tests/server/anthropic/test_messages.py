"""The Messages API through the official anthropic client, against a keyed server of a tiny random model: a
message whole and streamed, a forced tool call, count_tokens, and every error in Anthropic's shape, those the
HTTP layer answers before any route runs (a bad key, a body too large, a tenant over its rate limit) included,
while the OpenAI routes keep OpenAI's."""
from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from autoglm.server.anthropic import routes
from autoglm.server.tenants.rate_limits import LimitWindows
from tests.optional_packages import import_client, needs_xgrammar
from tests.server.live_server import start_server
from tests.server.manual_clock import ManualClock
from tests.server.tenants_files import TenantsFixture

anthropic = import_client("anthropic", "anthropic")

pytestmark = pytest.mark.timeout(120)

MODEL = "tiny-llama"
MAX_BODY_BYTES = 64 * 1024
# Events the client derives from the raw ones as it accumulates the message (not sent by the server).
DERIVED_EVENTS = {"text", "thinking", "signature", "input_json", "citation"}
HELLO = [{"role": "user", "content": "Hello there"}]
# Bounded, so that a random model under the call's grammar must close every value.
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
WEATHER_TOOL = {"name": "get_weather", "description": "The weather in a city", "input_schema": WEATHER_SCHEMA}
GREEDY = {"temperature": 0}  # not among the client's own arguments, sent as Anthropic's API takes it


@pytest.fixture(scope="module")
def tenants() -> TenantsFixture:
    fixture = TenantsFixture(tenants=[{"id": "team", "role": "user"},
                                      {"id": "limited", "limits": {"requests_per_minute": 1}},
                                      {"id": "viewers", "role": "reader"}])
    for name in ("team", "limited", "viewers"):
        fixture.add_key(name, name)
    return fixture


@pytest.fixture(scope="module")
def server(chat_model, tenants, tmp_path_factory):
    path = tenants.write(tmp_path_factory.mktemp("tenants") / "tenants.yaml")
    running = start_server(chat_model, served_model_name=MODEL, tenants_file=str(path),
                           max_request_body_bytes=MAX_BODY_BYTES, limit_windows=LimitWindows(clock=ManualClock()))
    yield running
    running.stop()


def client(server, key: str):
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=60)


def post(server, path: str, key: str, body: dict) -> httpx.Response:
    return httpx.post(server.url + path, headers={"x-api-key": key}, json=body, timeout=60)


def anthropic_error(response: httpx.Response, status: int, error_type: str) -> str:
    """The message of an error in Anthropic's shape, and nothing else in the body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == error_type
    return body["error"]["message"]


def count_tokens(server, key: str, **body) -> int:
    answer = post(server, "/v1/messages/count_tokens", key, {"model": MODEL, **body})
    assert answer.status_code == 200, answer.text
    return answer.json()["input_tokens"]


def test_a_message(server, tenants):
    message = client(server, tenants.keys["team"]).messages.create(
        model=MODEL, max_tokens=6, system="Answer briefly.", messages=HELLO, metadata={"user_id": "u-1"},
        extra_body=GREEDY)
    assert message.id.startswith("msg_") and message.type == "message" and message.role == "assistant"
    assert message.model == MODEL and message.stop_sequence is None
    (block,) = message.content
    assert block.type == "text" and block.text
    assert message.stop_reason in ("end_turn", "max_tokens")
    usage = message.usage
    assert 1 <= usage.output_tokens <= 6 and usage.cache_creation_input_tokens == 0
    assert usage.input_tokens + usage.cache_read_input_tokens == count_tokens(
        server, tenants.keys["team"], system="Answer briefly.", messages=HELLO)


def test_a_streamed_message_sends_anthropics_events_in_order(server, tenants):
    whole = client(server, tenants.keys["team"]).messages.create(model=MODEL, max_tokens=6, messages=HELLO,
                                                                  extra_body=GREEDY)
    with client(server, tenants.keys["team"]).messages.stream(model=MODEL, max_tokens=6, messages=HELLO,
                                                              extra_body=GREEDY) as stream:
        events = [event for event in stream if event.type not in DERIVED_EVENTS]
        streamed = stream.get_final_message()
    kinds = [event.type for event in events]
    assert kinds[:2] == ["message_start", "content_block_start"] and kinds[-3:] == [
        "content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    prompt = events[0].message.usage  # the second time round, the prefix cache holds part of the prompt
    assert events[0].message.content == [] and prompt.cache_read_input_tokens > 0
    assert prompt.input_tokens + prompt.cache_read_input_tokens == count_tokens(server, tenants.keys["team"],
                                                                                messages=HELLO)
    assert {event.index for event in events[1:-2]} == {0}
    assert "".join(event.delta.text for event in events[2:-3]) == whole.content[0].text
    assert streamed.content[0].text == whole.content[0].text and streamed.stop_reason == whole.stop_reason
    assert streamed.usage.output_tokens == whole.usage.output_tokens


def test_the_raw_stream_names_each_event_and_pings_once(server, tenants):
    with httpx.stream("POST", server.url + "/v1/messages", headers={"x-api-key": tenants.keys["team"]}, timeout=60,
                      json={"model": MODEL, "max_tokens": 3, "messages": HELLO, "stream": True}) as answer:
        lines = [line for line in answer.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines[0::2]]
    payloads = [json.loads(line.removeprefix("data: ")) for line in lines[1::2]]
    assert names[:2] == ["message_start", "ping"] and names.count("ping") == 1 and names[-1] == "message_stop"
    assert [payload["type"] for payload in payloads] == names


@needs_xgrammar
def test_a_forced_tool_call_matches_the_tools_input_schema(server, tenants):
    request = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "Weather in Paris?"}],
               "tools": [WEATHER_TOOL, {"name": "get_time", "input_schema": {"type": "object"}}],
               "tool_choice": {"type": "tool", "name": "get_weather"}, "extra_body": GREEDY}
    message = client(server, tenants.keys["team"]).messages.create(**request)
    assert message.stop_reason == "tool_use"
    (call,) = [block for block in message.content if block.type == "tool_use"]
    assert call.id.startswith("toolu_") and call.name == "get_weather"
    jsonschema.validate(call.input, WEATHER_SCHEMA)
    with client(server, tenants.keys["team"]).messages.stream(**request) as stream:
        streamed = stream.get_final_message()
    (streamed_call,) = [block for block in streamed.content if block.type == "tool_use"]
    assert streamed_call.input == call.input and streamed.stop_reason == "tool_use"


def test_count_tokens_is_the_length_of_the_prompt_the_chat_template_renders(server, tenants):
    key = tenants.keys["team"]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    chat = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi\nthere"},
            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    tokenized = httpx.post(server.url + "/tokenize", headers={"x-api-key": key},
                           json={"model": MODEL, "messages": chat})
    assert count_tokens(server, key, system=[{"type": "text", "text": "Be kind."}], messages=messages) == \
        tokenized.json()["count"]
    prefill = count_tokens(server, key, messages=[*HELLO, {"role": "assistant", "content": "Well"}])
    continued = httpx.post(server.url + "/tokenize", headers={"x-api-key": key}, json={
        "model": MODEL, "messages": [*HELLO, {"role": "assistant", "content": "Well"}],
        "add_generation_prompt": False, "continue_final_message": True})
    assert prefill == continued.json()["count"]


def test_a_missing_max_tokens_is_a_400_naming_it(server, tenants):
    answer = post(server, "/v1/messages", tenants.keys["team"], {"model": MODEL, "messages": HELLO})
    assert "max_tokens" in anthropic_error(answer, 400, "invalid_request_error")


@pytest.mark.parametrize(("extra", "named"), [
    ({"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}, "tools[0].type"),
    ({"service_tier": "priority"}, "service_tier"),
    ({"mcp_servers": [{"type": "url", "url": "https://example.com", "name": "x"}]}, "mcp_servers"),
    ({"temperature": 1.5}, "temperature"),
    ({"thinking": {"type": "enabled", "budget_tokens": 64}}, "--reasoning-parser"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, "'document'"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}]},
     "messages[0].content[0].tool_use_id"),
    ({"top_kk": 3}, "'top_kk'; did you mean 'top_k'?"),
])
def test_what_cannot_be_honoured_is_a_400_naming_the_field(server, tenants, extra, named):
    answer = post(server, "/v1/messages", tenants.keys["team"],
                  {"model": MODEL, "max_tokens": 2, "messages": HELLO, **extra})
    assert named in anthropic_error(answer, 400, "invalid_request_error")


def test_a_bad_key_is_an_authentication_error_and_a_reader_may_count_but_not_generate(server, tenants):
    with pytest.raises(anthropic.AuthenticationError) as refused:
        client(server, "agk-not-a-key").messages.create(model=MODEL, max_tokens=2, messages=HELLO)
    assert refused.value.body["error"]["type"] == "authentication_error" and refused.value.body["type"] == "error"
    anthropic_error(httpx.post(server.url + "/v1/messages/count_tokens", json={}), 401, "authentication_error")
    with pytest.raises(anthropic.PermissionDeniedError):
        client(server, tenants.keys["viewers"]).messages.create(model=MODEL, max_tokens=2, messages=HELLO)
    assert count_tokens(server, tenants.keys["viewers"], messages=HELLO) > 0


def test_a_body_over_the_limit_is_request_too_large(server, tenants):
    answer = post(server, "/v1/messages", tenants.keys["team"],
                  {"model": MODEL, "max_tokens": 2, "messages": HELLO, "system": "x" * MAX_BODY_BYTES})
    assert "max_request_body_bytes" in anthropic_error(answer, 413, "request_too_large")


def test_a_tenant_over_its_rate_limit_is_a_rate_limit_error(server, tenants):
    limited = client(server, tenants.keys["limited"])
    limited.messages.create(model=MODEL, max_tokens=1, messages=HELLO)
    with pytest.raises(anthropic.RateLimitError) as refused:
        limited.messages.create(model=MODEL, max_tokens=1, messages=HELLO)
    assert refused.value.body["error"]["type"] == "rate_limit_error"
    assert refused.value.response.headers["retry-after"]


def test_the_openai_routes_keep_openais_error_shape_and_take_x_api_key_too(server, tenants):
    for answer in (httpx.post(server.url + "/v1/chat/completions", json={"messages": HELLO}),
                   post(server, "/v1/chat/completions", tenants.keys["team"], {"messages": []})):
        assert set(answer.json()) == {"error"} and set(answer.json()["error"]) == {"message", "type", "param", "code"}
    models = httpx.get(server.url + "/v1/models", headers={"x-api-key": tenants.keys["team"]})
    assert models.status_code == 200 and models.json()["data"][0]["id"] == MODEL


def test_messages_are_counted_under_their_route_and_tenant(server, tenants):
    before = server.metrics()
    client(server, tenants.keys["team"]).messages.create(model=MODEL, max_tokens=1, messages=HELLO, extra_body=GREEDY)
    after = server.metrics()
    for name in ("autoglm:http_requests_total{route=/v1/messages,status=200}",
                 "autoglm:tenant_request_success_total{finished_reason=length,tenant=team}"):
        assert after[name] == before.get(name, 0.0) + 1, name


def test_a_bug_is_a_500_api_error_in_anthropics_shape(server, tenants, monkeypatch):
    def broken(_):
        raise RuntimeError("a bug")

    monkeypatch.setattr(routes, "chat_request", broken)
    answer = post(server, "/v1/messages", tenants.keys["team"], {"model": MODEL, "max_tokens": 2, "messages": HELLO})
    assert "RuntimeError: a bug" in anthropic_error(answer, 500, "api_error")
