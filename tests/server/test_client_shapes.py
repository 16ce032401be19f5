"""Messages and fields as OpenAI's and vLLM's clients really send them: a reply appended to the history as the
client returned it, vLLM's extras, and the roles and parts a text-only chat model cannot read."""
from __future__ import annotations

import json

import httpx
import pytest
from transformers import AutoTokenizer

from autoglm.engine.tokenize import PromptCharLimit
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatCompletionRequest
from autoglm.server.response_cache.key import response_cache_key
from autoglm.server.openai.chat_prompt import ChatRendering, render_chat_prompt
from tests.server.live_server import sse_payloads
from tests.server.test_errors import error_of, post

MODEL = "tiny-llama"
QUESTION = {"role": "user", "content": "To be, or not to be"}
GREEDY = {"temperature": 0, "max_tokens": 3}

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def tokenizer(chat_model):
    return AutoTokenizer.from_pretrained(chat_model)


def rendered(tokenizer, messages: list[dict], **options) -> str:
    request = ChatCompletionRequest.model_validate({"messages": messages})
    rendering = ChatRendering(**options)
    return tokenizer.decode(render_chat_prompt(tokenizer, request.messages, rendering,
                                               PromptCharLimit.of(tokenizer, 256)).token_ids)


@pytest.mark.parametrize("exclude_none", [False, True])
def test_a_reply_appended_as_the_client_returned_it_is_accepted(server, exclude_none):
    client = server.openai()
    first = client.chat.completions.create(model=MODEL, messages=[QUESTION], **GREEDY)
    reply = first.choices[0].message.model_dump(exclude_none=exclude_none)
    history = [QUESTION, reply, {"role": "user", "content": "Again"}]
    again = client.chat.completions.create(model=MODEL, messages=history, **GREEDY)
    assert again.choices[0].finish_reason == "length"
    # The reply is read as the text it holds, whatever else the client's dump carries.
    plain = client.chat.completions.create(model=MODEL, messages=[
        QUESTION, {"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "Again"}], **GREEDY)
    assert again.choices[0].message.content == plain.choices[0].message.content
    assert again.usage.prompt_tokens == plain.usage.prompt_tokens


ASSISTANT_EXTRAS = {"refusal": None, "audio": {"id": "audio_1"}, "function_call": None,
                    "annotations": [{"type": "url_citation", "url_citation": {
                        "url": "https://example.com", "title": "t", "start_index": 0, "end_index": 1}}]}


def test_fields_that_cannot_change_the_answer_are_accepted_and_not_rendered(server, tokenizer):
    plain = [QUESTION, {"role": "assistant", "content": "Whether"}, {"role": "user", "content": "Go on"}]
    dressed = [
        QUESTION,
        {"role": "assistant", "content": [{"type": "text", "text": "Whether"}, {"type": "refusal", "refusal": "No"}],
         **ASSISTANT_EXTRAS, "refusal": "No"},
        {"role": "user", "content": [{"type": "text", "text": "Go on", "cache_control": {"type": "ephemeral"},
                                      "prompt_cache_breakpoint": {"mode": "explicit"}}]},
    ]
    assert rendered(tokenizer, dressed) == rendered(tokenizer, plain)
    body = {"messages": dressed, "request_id": "mine-1", "prompt_cache_options": {"mode": "implicit"}, **GREEDY}
    assert post(server, "/v1/chat/completions", json=body).status_code == 200


def test_ignored_fields_do_not_split_the_response_cache():
    def key(body: dict) -> str:
        return response_cache_key("tiny-llama", "source", None, "chat", ChatCompletionRequest.model_validate(body))

    plain = {"messages": [{**QUESTION, "content": [{"type": "text", "text": QUESTION["content"]}]},
                          {"role": "assistant", "content": [{"type": "text", "text": "Whether"}]}]}
    dressed = {"messages": [
        {**QUESTION, "content": [{"type": "text", "text": QUESTION["content"], "cache_control": {"type": "x"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Whether"}, {"type": "refusal", "refusal": "No"}],
         **ASSISTANT_EXTRAS, "refusal": "No"}],
        "request_id": "mine-2", "prompt_cache_options": {"mode": "implicit"}}
    assert key(dressed) == key(plain)
    # What the template reads does split it.
    assert key({**plain, "chat_template_kwargs": {"enable_thinking": False}}) != key(plain)
    assert key({**plain, "continue_final_message": True, "add_generation_prompt": False}) != key(plain)


THINKING_TEMPLATE = (
    "{% for message in messages %}<|{{ message.role }}|>"
    "{% if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>{% endif %}"
    "{{ message.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is false %}<think></think>{% endif %}{% endif %}"
)


def test_reasoning_content_and_chat_template_kwargs_reach_the_template(tokenizer):
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = THINKING_TEMPLATE
    history = [QUESTION, {"role": "assistant", "content": "Whether", "reasoning_content": "Hamlet"}]
    text = rendered(tokenizer, history, template_kwargs={"enable_thinking": False})
    assert "<|assistant|><think>Hamlet</think>Whether" in text and text.endswith("<|assistant|><think></think>")
    assert rendered(tokenizer, history).endswith("Whether\n<|assistant|>")
    renamed = [QUESTION, {"role": "assistant", "content": "Whether", "reasoning": "Hamlet"}]  # vLLM's later name
    assert rendered(tokenizer, renamed) == rendered(tokenizer, history)


@pytest.mark.parametrize("name", ["add_generation_prompt", "tokenize", "messages", "chat_template"])
def test_chat_template_kwargs_may_not_set_what_the_request_sets(tokenizer, name):
    with pytest.raises(APIError) as caught:
        rendered(tokenizer, [QUESTION], template_kwargs={name: True})
    error = caught.value.body.error
    assert error.param == "chat_template_kwargs" and f"may not set '{name}'" in error.message


def test_continue_final_message_leaves_the_last_message_open(server, tokenizer):
    history = [QUESTION, {"role": "assistant", "content": "Whether 'tis"}]
    text = rendered(tokenizer, history, add_generation_prompt=False, continue_final_message=True)
    assert text.endswith("<|assistant|>Whether 'tis")
    body = {"messages": history, "continue_final_message": True, "add_generation_prompt": False, **GREEDY}
    assert post(server, "/v1/chat/completions", json=body).status_code == 200
    tokenized = post(server, "/tokenize", json={"messages": history, "continue_final_message": True,
                                                "add_generation_prompt": False}).json()["tokens"]
    assert tokenizer.decode(tokenized) == text
    refused = post(server, "/v1/chat/completions", json={**body, "add_generation_prompt": True})
    error = error_of(refused)
    assert refused.status_code == 400 and error["param"] == "continue_final_message"
    assert "set add_generation_prompt to false" in error["message"]


@pytest.mark.parametrize("message, param, words", [
    ({"role": "root", "content": "Hi"}, "messages[1].role",
     "'root' is not a chat role; a message's role is one of 'system', 'developer', 'user', 'assistant', 'tool'"),
    ({"role": "user", "content": [{"type": "text", "text": "Look"},
                                  {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
     "messages[1].content[1]", "this model takes text only, so it cannot read a part of type 'image_url'"),
    ({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]},
     "messages[1].content[0]", "this server reads text and image parts only, so it cannot read a part of type 'input_audio'"),
    ({"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]},
     "messages[1].content[0]", "this server reads text and image parts only, so it cannot read a part of type 'file'"),
    ({"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
     "messages[1].function_call", "send the call in tool_calls"),
    ({"role": "user", "content": "Hi", "refusal": "No"}, "messages[1].refusal",
     "only an assistant message carries refusal"),
    ({"role": "user", "content": [{"type": "refusal", "refusal": "No"}]}, "messages[1].content[0]",
     "only an assistant message carries a refusal part"),
])
def test_what_the_model_cannot_read_is_400_naming_it(server, message, param, words):
    response = post(server, "/v1/chat/completions", json={"messages": [QUESTION, message], "max_tokens": 2})
    error = error_of(response)
    assert response.status_code == 400 and error["param"] == param and words in error["message"], error


def test_a_single_harmless_value_is_named_alone(server):
    error = error_of(post(server, "/v1/chat/completions", json={"messages": [QUESTION], "prediction": {}}))
    assert error["message"] == "prediction is not supported yet by this server; it accepts only null"


def test_the_clients_request_id_is_echoed_logged_and_may_repeat(server, caplog):
    body = {"messages": [QUESTION], **GREEDY}
    with caplog.at_level("INFO", logger="autoglm.requests"):
        by_header = [post(server, "/v1/chat/completions", json=body, headers={"x-request-id": "retry-7"})
                     for _ in range(2)]
        by_field = post(server, "/v1/chat/completions", json={**body, "request_id": "field-8"})
        both = post(server, "/v1/chat/completions", json={**body, "request_id": "field-9"},
                    headers={"x-request-id": "header-9"})
    assert [response.status_code for response in by_header] == [200, 200]  # a retry is no clash
    assert [response.headers["x-request-id"] for response in (*by_header, by_field, both)] == [
        "retry-7", "retry-7", "field-8", "header-9"]
    assert len({response.json()["id"] for response in by_header}) == 2  # the engine's own ids
    lines = [json.loads(record.getMessage()) for record in caplog.records if record.name == "autoglm.requests"]
    assert [line["x_request_id"] for line in lines] == ["retry-7", "retry-7", "field-8", "header-9"]


def test_every_answer_carries_an_x_request_id(server):
    answers = [httpx.get(server.url + "/health"), httpx.get(server.url + "/v1/nothing"),
               post(server, "/v1/chat/completions", json={"messages": [QUESTION], "temprature": 0})]
    made_up = [answer.headers["x-request-id"] for answer in answers]
    assert len(set(made_up)) == 3 and all(len(value) == 32 for value in made_up)
    refused = post(server, "/v1/chat/completions", json={"messages": [], "request_id": "x"},
                   headers={"x-request-id": "bad-1"})
    assert refused.status_code == 400 and refused.headers["x-request-id"] == "bad-1"
    with httpx.stream("POST", server.url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2, "stream": True},
                      headers={"x-request-id": "stream-1"}) as streamed:
        assert streamed.headers["x-request-id"] == "stream-1"


def test_a_request_id_that_cannot_be_a_header_is_400(server):
    error = error_of(post(server, "/v1/completions", json={"prompt": "Hi", "request_id": "a\nb"}))
    assert error["param"] == "request_id" and "printable ASCII" in error["message"]


def test_a_model_is_retrieved_by_its_id_and_an_unknown_one_is_404(server):
    client = server.openai()
    card = client.models.retrieve(MODEL)
    assert (card.id, card.object) == (MODEL, "model")
    assert card.model_dump() == next(model for model in client.models.list().data if model.id == MODEL).model_dump()
    response = httpx.get(server.url + "/v1/models/no-such-model")
    error = error_of(response)
    assert response.status_code == 404 and (error["param"], error["code"]) == ("model", "model_not_found")
    assert "'no-such-model' does not exist" in error["message"]


@pytest.mark.parametrize("path", ["/v1/models", f"/v1/models/{MODEL}", "/version", "/metrics", "/tokenizer_info"])
def test_head_answers_wherever_get_does(server, path):
    got, head = httpx.get(server.url + path), httpx.head(server.url + path)
    assert got.status_code == head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]


def test_tokenizer_info_gives_what_lm_evaluation_harness_reads(server, tokenizer):
    info = httpx.get(server.url + "/tokenizer_info").json()
    assert info["eos_token"] == tokenizer.eos_token and info["bos_token"] == tokenizer.bos_token
    assert info["chat_template"] == tokenizer.chat_template and info["tokenizer_class"] == type(tokenizer).__name__
    assert info["model_max_length"] == server.state.engine.engine.max_context_len
    # lm-evaluation-harness then tokenizes through /tokenize, the end-of-text token among the rest.
    tokens = post(server, "/tokenize", json={"prompt": info["eos_token"], "add_special_tokens": False}).json()["tokens"]
    assert tokens == [tokenizer.eos_token_id]


def test_streamed_deltas_leave_out_what_they_do_not_carry(server):
    with httpx.stream("POST", server.url + "/v1/chat/completions",
                      json={"messages": [QUESTION], "stream": True, "n": 2, **GREEDY}) as response:
        chunks = [json.loads(payload) for payload in sse_payloads(response)[:-1]]
    deltas = [(choice["index"], choice["delta"]) for chunk in chunks for choice in chunk["choices"]]
    assert all(None not in delta.values() for _, delta in deltas)
    for index in (0, 1):
        own = [delta for choice_index, delta in deltas if choice_index == index]
        assert own[0]["role"] == "assistant" and all("role" not in delta for delta in own[1:])
