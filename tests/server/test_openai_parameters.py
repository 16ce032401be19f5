"""OpenAI's request fields: misspelt ones named, unimplemented ones refused unless harmless, logit_bias honoured."""
from __future__ import annotations

import math
from functools import partial

import httpx
import openai
import pytest

from autoglm.sampling_params import SamplingParams
from autoglm.server.openai.protocol import ChatMessage
from tests.server.test_errors import error_of, post

MODEL = "tiny-llama"
PROMPT = "Hello world"
MESSAGES = [{"role": "user", "content": "To be, or not to be"}]
GREEDY = {"temperature": 0, "extra_body": {"ignore_eos": True}}

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("path, body, param, message", [
    ("/v1/completions", {"prompt": PROMPT, "max_token": 4}, "max_token",
     "unknown parameter 'max_token'; did you mean 'max_tokens'?"),
    ("/v1/chat/completions", {"messages": MESSAGES, "temprature": 0}, "temprature",
     "unknown parameter 'temprature'; did you mean 'temperature'?"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi", "nmae": "ann"}]}, "messages",
     "unknown parameter 'messages.0.nmae'; did you mean 'name'?"),
    ("/v1/completions", {"prompt": PROMPT, "stream_options": {"include_usag": True}}, "stream_options",
     "unknown parameter 'stream_options.include_usag'; did you mean 'include_usage'?"),
    ("/v1/completions", {"prompt": PROMPT, "frobnicate": True}, "frobnicate", "unknown parameter 'frobnicate'"),
    ("/v1/completions", {"prompt": PROMPT, "tools": []}, "tools", "unknown parameter 'tools'"),
])
def test_unknown_fields_are_400_naming_them_and_the_closest_known_name(server, path, body, param, message):
    response = post(server, path, json=body)
    assert response.status_code == 400
    error = error_of(response)
    assert (error["message"], error["param"], error["code"]) == (message, param, "unknown_parameter")


@pytest.mark.parametrize("path, field, value", [
    ("/v1/completions", "suffix", "and so on"),
    ("/v1/completions", "stream_options", {"include_obfuscation": True}),
    ("/v1/completions", "guided_decoding_backend", "outlines"),
    ("/v1/chat/completions", "guided_whitespace_pattern", "[ ]?"),
    ("/v1/chat/completions", "functions", [{"name": "f"}]),
    ("/v1/chat/completions", "function_call", {"name": "f"}),
    ("/v1/chat/completions", "audio", {"voice": "alloy", "format": "wav"}),
    ("/v1/chat/completions", "modalities", ["text", "audio"]),
    ("/v1/chat/completions", "prediction", {"type": "content", "content": "Hi"}),
    ("/v1/chat/completions", "reasoning_effort", "low"),
    ("/v1/chat/completions", "service_tier", "flex"),
    ("/v1/chat/completions", "store", True),
    ("/v1/chat/completions", "verbosity", "high"),
    ("/v1/chat/completions", "web_search_options", {}),
    ("/v1/chat/completions", "prompt_cache_retention", "24h"),
])
def test_unimplemented_fields_that_would_change_the_answer_are_refused(server, path, field, value):
    base = {"prompt": PROMPT} if path == "/v1/completions" else {"messages": MESSAGES}
    response = post(server, path, json={**base, field: value, "max_tokens": 2})
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"].split(".")[0] == field and error["code"] == "unsupported_parameter"
    assert "is not supported yet by this server; it accepts only" in error["message"]


def test_unimplemented_fields_at_values_that_ask_for_nothing_are_accepted(server):
    client = server.openai()
    chat = client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=3, response_format={"type": "text"}, tools=[],
        tool_choice="none", parallel_tool_calls=True, user="u1", store=False, metadata={"team": "a"},
        service_tier="auto", modalities=["text"], prompt_cache_key="k", safety_identifier="s", verbosity="medium",
        stream_options=None, **GREEDY)
    assert chat.choices[0].finish_reason == "length"
    completion = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, suffix="", best_of=1,
                                           user="u1", temperature=0,
                                           extra_body={"ignore_eos": True, "guided_decoding_backend": "xgrammar"})
    assert completion.choices[0].finish_reason == "length"
    streamed = post(server, "/v1/completions", json={
        "prompt": PROMPT, "max_tokens": 2, "stream": True, "suffix": None,
        "stream_options": {"include_usage": True, "include_obfuscation": False}})
    assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")


def first_token_id(server, text: str) -> int:
    return httpx.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"][0]


def detokenize(server, tokens: list[int]) -> str:
    return httpx.post(server.url + "/detokenize", json={"tokens": tokens}).json()["prompt"]


def test_logit_bias_forces_and_bans_tokens_for_greedy_requests(server):
    client = server.openai()
    greedy_text = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1, **GREEDY).choices[0].text
    greedy_id = first_token_id(server, greedy_text)
    forced = next(token for token in map(partial(first_token_id, server), (" the", " fox")) if token != greedy_id)

    biased = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, logprobs=0,
                                       logit_bias={str(forced): 100}, **GREEDY)
    assert biased.choices[0].text == detokenize(server, [forced] * 4)
    # Log-probs stay the model's own, before the bias: a token greedy would not pick has at most 1/2.
    assert biased.choices[0].logprobs.token_logprobs[0] <= math.log(0.5)
    banned = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1, logit_bias={str(greedy_id): -100},
                                       **GREEDY)
    assert banned.choices[0].text != greedy_text
    chat = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3,
                                          logit_bias={str(forced): 100}, **GREEDY)
    assert chat.choices[0].message.content == detokenize(server, [forced] * 3)


@pytest.mark.parametrize("logit_bias, words", [
    ({"320": 5}, "logit_bias must be keyed by token ids in [0, 320), got 320"),
    ({"5": 100.5}, "logit_bias must be a dict of token id (int >= 0) to bias (a number in [-100, 100])"),
    ({"the": 5}, "logit_bias keys must be token ids (integers >= 0 written as strings), got 'the'"),
    ({"-3": 5}, "logit_bias keys must be token ids"),
])
def test_bad_logit_bias_is_400(server, logit_bias, words):
    with pytest.raises(openai.BadRequestError) as caught:
        server.openai().completions.create(model=MODEL, prompt=PROMPT, max_tokens=2, logit_bias=logit_bias)
    assert caught.value.body["param"] == "logit_bias" and words in caught.value.body["message"]


def test_the_engine_itself_refuses_logit_bias_outside_the_vocabulary(server):
    """For offline users, whose requests do not pass the server's checks."""
    with pytest.raises(ValueError, match=r"logit_bias must be keyed by token ids in \[0, 320\), got 400"):
        server.state.engine.engine.add_request("offline", "Hi", SamplingParams(logit_bias={400: 1.0}))


def test_a_messages_name_reaches_the_chat_template():
    assert ChatMessage(role="user", content="Hi", name="ann").as_template_input() == {
        "role": "user", "content": "Hi", "name": "ann"}
    assert ChatMessage(role="user", content="Hi").as_template_input() == {"role": "user", "content": "Hi"}


def test_unsupported_and_unknown_routes_answer_in_openais_error_shape(server):
    with pytest.raises(openai.NotFoundError) as caught:
        server.openai().moderations.create(model=MODEL, input="Hello")
    assert caught.value.body["code"] == "unsupported_endpoint"
    assert caught.value.body["message"].startswith("/v1/moderations is not supported by this server")
    unknown = httpx.get(server.url + "/v1/nothing/here")
    assert unknown.status_code == 404 and error_of(unknown)["code"] == "unknown_url"
    assert "GET '/v1/nothing/here'" in error_of(unknown)["message"]
    wrong_method = httpx.get(server.url + "/v1/completions")
    assert wrong_method.status_code == 405 and error_of(wrong_method)["code"] == "method_not_allowed"
