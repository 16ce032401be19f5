"""A client's mistake or excess is a 400 naming the field and the limit, never a 500: token ids past
the vocabulary, text that is not Unicode, unbounded priorities, requests that fan out too far, bodies
nested too deep, tool results that name no call."""
from __future__ import annotations

import json
from functools import partial

import httpx
import pytest

from autoglm.sampling_params import SamplingParams
from autoglm.server.openai.errors import APIError
from autoglm.server.http.json_nesting import MAX_JSON_DEPTH
from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.openai.sampling import chat_sampling_params

pytestmark = pytest.mark.timeout(60)

TINY_VOCAB = 320  # tests/tiny_models.py
CHECK_PARAMS = partial(SamplingParams.check_vocab, vocab_size=TINY_VOCAB)  # the engine's check for that vocabulary


def post_json(server, path: str, body: dict) -> httpx.Response:
    """Post `body` as JSON with non-ASCII escaped, so that a lone surrogate travels as "\\ud800"."""
    return httpx.post(server.url + path, content=json.dumps(body).encode("ascii"),
                      headers={"content-type": "application/json"}, timeout=30)


def bad_request(response: httpx.Response) -> dict:
    assert response.status_code == 400, response.text
    return response.json()["error"]


@pytest.mark.parametrize("token_id", [-1, TINY_VOCAB, 2**64, -(10**30)])
def test_detokenize_refuses_ids_outside_the_vocabulary_naming_the_range(server, token_id):
    error = bad_request(post_json(server, "/detokenize", {"tokens": [5, token_id]}))
    assert error["param"] == "tokens" and error["code"] == "invalid_value"
    assert f"token id {token_id} is out of range; token ids must be in [0, {TINY_VOCAB})" in error["message"]
    assert post_json(server, "/detokenize", {"tokens": [5, TINY_VOCAB - 1]}).status_code == 200


LONE_SURROGATE = "\ud800"


@pytest.mark.parametrize("path, body, field", [
    ("/v1/completions", {"prompt": "Hi" + LONE_SURROGATE}, "prompt"),
    ("/v1/completions", {"prompt": ["Hi", LONE_SURROGATE]}, "prompt.1"),
    ("/v1/completions", {"prompt": "Hi", "stop": ["ok", "x" + LONE_SURROGATE]}, "stop.1"),
    ("/v1/completions", {"prompt": "Hi", "model": LONE_SURROGATE}, "model"),
    ("/v1/completions", {"prompt": "Hi", LONE_SURROGATE: 1}, "the request body"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONE_SURROGATE}]}, "messages.0.content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": LONE_SURROGATE}]}]},
     "messages.0.content.0.text"),
    ("/tokenize", {"prompt": LONE_SURROGATE}, "prompt"),
])
def test_a_lone_surrogate_is_a_400_naming_the_field(server, path, body, field):
    error = bad_request(post_json(server, path, body))
    assert error["message"].startswith(f"{field}: text must be valid Unicode")
    assert error["param"] == (None if field == "the request body" else field.split(".")[0])


def test_tokenize_without_messages_is_a_400_naming_them(server):
    error = bad_request(post_json(server, "/tokenize", {"messages": []}))
    assert error["param"] == "messages" and "at least 1 item" in error["message"]


def test_priority_beyond_the_bound_is_a_400_naming_it(server):
    for path, body in (("/v1/completions", {"prompt": "Hi"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})):
        for priority in (-(10**30), 1001):
            error = bad_request(post_json(server, path, {**body, "max_tokens": 1, "priority": priority}))
            assert error["param"] == "priority"
            assert error["message"] == (f"priority must be in [-1000, 1000] (the max_abs_priority setting), "
                                        f"got {priority}")
        assert post_json(server, path, {**body, "max_tokens": 1, "priority": -1000}).status_code == 200


def test_a_request_past_max_sequences_per_request_is_refused_naming_the_cap(server):
    error = bad_request(post_json(server, "/v1/completions", {"prompt": ["Hi"] * 17, "n": 16, "max_tokens": 1}))
    assert error["param"] == "prompt"
    assert error["message"].startswith("this request would create 272 sequences (17 prompts x n=16) but the server "
                                       "allows at most 256 per request (max_sequences_per_request)")
    error = bad_request(post_json(server, "/v1/completions", {"prompt": ["Hi"] * 20, "best_of": 13, "max_tokens": 1}))
    assert "260 sequences (20 prompts x best_of=13)" in error["message"]
    at_the_cap = post_json(server, "/v1/completions", {"prompt": ["Hi"] * 16, "n": 16, "max_tokens": 1})
    assert at_the_cap.status_code == 200 and len(at_the_cap.json()["choices"]) == 256


def test_chat_n_counts_against_the_cap():
    request = ChatCompletionRequest(messages=[{"role": "user", "content": "Hi"}], n=8)
    assert chat_sampling_params(request, CHECK_PARAMS, max_sequences=8, constraint=None).n == 8
    with pytest.raises(APIError) as caught:
        chat_sampling_params(request, CHECK_PARAMS, max_sequences=4, constraint=None)
    assert caught.value.status == 400 and caught.value.body.error.param == "n"
    assert "would create 8 sequences (1 prompt x n=8)" in caught.value.body.error.message


def deep_body(key: str, levels: int) -> bytes:
    """A body whose `key` holds arrays nested so that the body as a whole is `levels` deep."""
    return f'{{"max_tokens": 1, "{key}": {"[" * (levels - 1)}{"]" * (levels - 1)}}}'.encode()


@pytest.mark.parametrize("path, content, param", [
    ("/v1/chat/completions", deep_body("messages", 100_000), "messages"),
    ("/v1/chat/completions", deep_body("messages", MAX_JSON_DEPTH + 1), "messages"),
    ("/v1/completions", b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "a"),
    ("/tokenize", b"[" * 100_000, None),
])
def test_a_body_nested_past_the_limit_is_a_400_stating_it(server, path, content, param):
    response = httpx.post(server.url + path, content=content, headers={"content-type": "application/json"},
                          timeout=30)
    error = bad_request(response)
    assert (error["param"], error["code"]) == (param, "request_too_deep")
    assert f"nests arrays and objects more than {MAX_JSON_DEPTH} levels deep" in error["message"]
    assert f"this server takes at most {MAX_JSON_DEPTH} levels" in error["message"]
    assert post_json(server, "/v1/completions", {"prompt": "Hi", "max_tokens": 1}).status_code == 200


def test_a_body_at_the_nesting_limit_reaches_the_app(server):
    response = httpx.post(server.url + "/v1/completions", content=deep_body("prompt", MAX_JSON_DEPTH),
                          headers={"content-type": "application/json"}, timeout=30)
    error = bad_request(response)
    assert (error["param"], error["code"]) == ("prompt", "invalid_type")  # the prompt's type, not its depth


TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}


@pytest.mark.parametrize("path, extra", [("/v1/chat/completions", {"max_tokens": 1}), ("/tokenize", {})])
@pytest.mark.parametrize("tool_message", [{"role": "tool", "content": "12:00"},
                                          {"role": "tool", "content": "12:00", "tool_call_id": ""}])
def test_a_tool_message_without_its_call_id_is_a_400_naming_it(server, path, extra, tool_message):
    messages = [{"role": "user", "content": "Time?"}, {"role": "assistant", "tool_calls": [TOOL_CALL]}]
    error = bad_request(post_json(server, path, {"messages": [*messages, tool_message], **extra}))
    assert (error["param"], error["code"]) == ("messages[2].tool_call_id", "invalid_value")
    assert error["message"].startswith("messages[2].tool_call_id: a tool message must name the tool call it answers")
    answered = {**tool_message, "tool_call_id": "call_1"}
    assert post_json(server, path, {"messages": [*messages, answered], **extra}).status_code == 200


@pytest.mark.parametrize("path, extra", [("/v1/chat/completions", {"max_tokens": 1}), ("/tokenize", {})])
@pytest.mark.parametrize("history", [
    [{"role": "user", "content": "Time?"}],  # no call made at all
    [{"role": "user", "content": "Time?"}, {"role": "assistant", "tool_calls": [TOOL_CALL]}],  # another call
])
def test_a_tool_message_answering_no_earlier_call_is_a_400_naming_it(server, path, extra, history):
    tool_message = {"role": "tool", "content": "12:00", "tool_call_id": "call_9"}
    error = bad_request(post_json(server, path, {"messages": [*history, tool_message], **extra}))
    index = len(history)
    assert (error["param"], error["code"]) == (f"messages[{index}].tool_call_id", "invalid_value")
    assert "'call_9', which no earlier assistant message's tool_calls holds" in error["message"]
    # A result given before the call it answers is refused too: the call must come first.
    early = [history[0], {**tool_message, "tool_call_id": "call_1"}, {"role": "assistant", "tool_calls": [TOOL_CALL]}]
    assert bad_request(post_json(server, path, {"messages": early, **extra}))["param"] == "messages[1].tool_call_id"
    assert post_json(server, "/v1/completions", {"prompt": "Hi", "max_tokens": 1}).status_code == 200
