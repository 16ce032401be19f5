"""Thinking and tool calls served end to end through the official openai client.

A scripted runner stands in for the model and writes given transcripts in GLM-4.5's format (its tokens,
position by position, so proposals from n-gram speculation are verified against the same script); a tiny
GLM-4.5-format model with real weights shows what only real sampling shows (the thinking budget, a
schema after free thinking).
"""
from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest
from transformers import AutoTokenizer

from autoglm.config import AutoGLMConfig
from autoglm.config.sources import ConfigError
from autoglm.engine.tokenize import PromptCharLimit
from autoglm.server.openai.chat_prompt import ChatRendering, render_chat_prompt
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatMessage
from autoglm.server.reasoning.thinking_bounds import request_thinking
from autoglm.server.state import ServerState
from autoglm.thinking import ThinkingPhase
from tests.engine.scripted_engine import TranscriptRunner, scripted_engine
from tests.optional_packages import needs_xgrammar
from tests.server.live_server import start_server
from tests.thinking_model import make_glm45_chat_model

pytestmark = pytest.mark.timeout(120)

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
           "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
# Thinking, a word, then a call whose string argument holds a quote, '<' and non-ASCII text.
THINK_THEN_CALL = ("<think>The user wants Zürich's weather.\nI should call get_weather.</think>\nLet me check."
                   "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich \"old town\" <north></arg_value>"
                   "\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>")
TWO_CALLS = ("<think>Two calls.</think><tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
             "</tool_call><tool_call>get_time\n</tool_call>")
EXPECTED = {
    THINK_THEN_CALL: ("The user wants Zürich's weather.\nI should call get_weather.", "Let me check.",
                      [("get_weather", {"city": 'Zürich "old town" <north>', "days": 3})]),
    TWO_CALLS: ("Two calls.", None, [("get_weather", {"city": "北京"}), ("get_time", {})]),
}


@pytest.fixture(scope="module")
def glm45_model(tmp_path_factory):
    return make_glm45_chat_model(tmp_path_factory.mktemp("tiny-glm45"))


@pytest.fixture(scope="module")
def tokenizer(glm45_model):
    return AutoTokenizer.from_pretrained(glm45_model)


def scripted_server(model, tokenizer, **settings):
    runner = TranscriptRunner(len(tokenizer), tokenizer.eos_token_id)
    engine_settings = {"max_context_len": 512, **{k: v for k, v in settings.items() if k == "speculative_config"}}
    server = start_server(model, load_engine=lambda: scripted_engine(256, runner, model, **engine_settings),
                          served_model_name="glm", max_context_len=512, reasoning_parser="glm45",
                          trust_request_chat_template=True, **settings)
    return server, runner


@pytest.fixture(scope="module")
def scripted(glm45_model, tokenizer):
    server, runner = scripted_server(glm45_model, tokenizer)
    yield server, runner
    server.stop()


@pytest.fixture(scope="module")
def speculative(glm45_model, tokenizer):
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    server, runner = scripted_server(glm45_model, tokenizer, speculative_config=ngram)
    yield server, runner
    server.stop()


def script(runner: TranscriptRunner, tokenizer, *transcripts: str) -> None:
    runner.scripts = [tokenizer.encode(text, add_special_tokens=False) for text in transcripts]


def ask(transcripts: tuple[str, ...], **extra) -> dict:
    """A request whose user turn holds the transcripts, so that n-gram speculation finds them to propose."""
    return {"model": "glm", "messages": [{"role": "user", "content": "Repeat: " + " ".join(transcripts)}],
            "tools": TOOLS, "temperature": 0, "max_tokens": 200, "n": len(transcripts), **extra}


def streamed(client: openai.OpenAI, request: dict) -> dict[int, dict]:
    """Each choice's reasoning, content and calls as its deltas build them, and its last finish reason."""
    choices: dict[int, dict] = {}
    for chunk in client.chat.completions.create(**request, stream=True):
        for choice in chunk.choices:
            own = choices.setdefault(choice.index, {"reasoning": "", "content": "", "calls": {}})
            delta = choice.delta
            own["reasoning"] += (delta.model_extra or {}).get("reasoning_content") or ""
            own["content"] += delta.content or ""
            for call in delta.tool_calls or []:
                if call.id is not None:
                    own["calls"][call.index] = [call.function.name, ""]
                own["calls"][call.index][1] += call.function.arguments
            own["finish_reason"] = choice.finish_reason
    return choices


def assert_reply(reasoning, content, calls, transcript: str) -> None:
    expected_reasoning, expected_content, expected_calls = EXPECTED[transcript]
    assert reasoning == expected_reasoning
    assert (content or None) == expected_content
    assert [(name, json.loads(arguments)) for name, arguments in calls] == expected_calls


@pytest.mark.parametrize("server_name", ["scripted", "speculative"])
def test_thinking_content_and_calls_whole_and_streamed_with_n_2(server_name, request, tokenizer):
    server, runner = request.getfixturevalue(server_name)
    transcripts = (THINK_THEN_CALL, TWO_CALLS)
    script(runner, tokenizer, *transcripts)
    client = server.openai()
    whole = client.chat.completions.create(**ask(transcripts))
    assert len(whole.choices) == 2
    for choice, transcript in zip(whole.choices, transcripts):
        message = choice.message
        assert choice.finish_reason == "tool_calls"
        assert message.model_extra["reasoning"] == message.model_extra["reasoning_content"]
        assert_reply(message.model_extra["reasoning_content"], message.content,
                     [(call.function.name, call.function.arguments) for call in message.tool_calls], transcript)
    for index, own in streamed(client, ask(transcripts)).items():
        assert own["finish_reason"] == "tool_calls"
        assert_reply(own["reasoning"], own["content"], list(own["calls"].values()), transcripts[index])
        assert own["calls"][0][1] == whole.choices[index].message.tool_calls[0].function.arguments


def test_speculation_verified_runs_of_several_tokens(speculative, tokenizer):
    server, runner = speculative
    script(runner, tokenizer, THINK_THEN_CALL)
    before = server.metrics().get("autoglm:spec_decode_num_accepted_tokens_total", 0.0)
    server.openai().chat.completions.create(**ask((THINK_THEN_CALL,)))
    assert server.metrics()["autoglm:spec_decode_num_accepted_tokens_total"] > before


def test_include_reasoning_false_drops_the_thinking(scripted, tokenizer):
    server, runner = scripted
    script(runner, tokenizer, "<think>hidden</think>Shown.")
    message = server.openai().chat.completions.create(
        **ask(("x",), extra_body={"include_reasoning": False})).choices[0].message
    assert message.content == "Shown." and "reasoning_content" not in (message.model_extra or {})


UNCLOSED = "<think>ok</think><tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par"


def test_a_call_left_open_is_content_whole_and_closed_as_sent_streamed(scripted, tokenizer):
    server, runner = scripted
    script(runner, tokenizer, UNCLOSED)
    client = server.openai()
    counted = server.metrics().get("autoglm:malformed_tool_calls_total{parser=glm45}", 0.0)
    choice = client.chat.completions.create(**ask(("x",))).choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert choice.message.content == UNCLOSED.removeprefix("<think>ok</think>")
    own = streamed(client, ask(("x",)))[0]
    assert own["finish_reason"] == "tool_calls"
    assert [(name, json.loads(arguments)) for name, arguments in own["calls"].values()] == [
        ("get_weather", {"city": "Par"})]
    assert server.metrics()["autoglm:malformed_tool_calls_total{parser=glm45}"] == counted + 2


def test_arguments_their_schema_refuses_are_content(scripted, tokenizer):
    server, runner = scripted
    bad = "<tool_call>get_weather\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"  # no city
    script(runner, tokenizer, bad)
    choice = server.openai().chat.completions.create(**ask(("x",))).choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None and choice.message.content == bad


def test_a_call_cut_by_max_tokens_ends_with_length(scripted, tokenizer):
    server, runner = scripted
    script(runner, tokenizer, THINK_THEN_CALL)
    cut = len(tokenizer.encode(THINK_THEN_CALL.split("<arg_key>days")[0], add_special_tokens=False))
    client = server.openai()
    choice = client.chat.completions.create(**ask((THINK_THEN_CALL,), max_tokens=cut)).choices[0]
    assert choice.finish_reason == "length"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.function.arguments.startswith('{"city": "Zürich')
    own = streamed(client, ask((THINK_THEN_CALL,), max_tokens=cut))[0]
    assert own["finish_reason"] == "length" and own["calls"][0][1] == call.function.arguments


def test_a_request_template_is_rendered_only_where_trusted(scripted, glm45_model, tokenizer):
    server, runner = scripted
    script(runner, tokenizer, "Fine.")
    own_template = "{% for m in messages %}<|user|>{{ m.content }}{% endfor %}<|assistant|>"
    body = {"model": "glm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
            "chat_template": own_template}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30).json()
    assert answer["choices"][0]["message"]["content"] == "Fine."
    tokens = httpx.post(server.url + "/tokenize", json={"model": "glm", "messages": body["messages"],
                                                       "chat_template": own_template}, timeout=30).json()
    assert tokens["tokens"] == tokenizer.encode("<|user|>hi<|assistant|>", add_special_tokens=False)
    broken = httpx.post(server.url + "/v1/chat/completions", json={**body, "chat_template": "{% for %}"}, timeout=30)
    assert broken.status_code == 400 and broken.json()["error"]["param"] == "chat_template"


@pytest.fixture(scope="module")
def glm45_server(glm45_model):
    running = start_server(glm45_model, served_model_name="glm", max_context_len=512, kv_cache_memory="8MiB",
                           reasoning_parser="glm45")
    yield running
    running.stop()


def test_a_thinking_budget_ends_the_thinking_at_n_tokens(glm45_server, tokenizer):
    client = glm45_server.openai()
    request = {"model": "glm", "messages": [{"role": "user", "content": "Think."}], "temperature": 0,
               "max_tokens": 30}
    unbounded = client.chat.completions.create(**request).choices[0].message
    assert unbounded.content is None  # the model thinks all along
    for budget in (0, 4):
        message = client.chat.completions.create(**request, extra_body={"thinking_token_budget": budget}
                                                 ).choices[0].message
        reasoning = message.model_extra.get("reasoning_content") or ""
        assert len(tokenizer.encode(reasoning, add_special_tokens=False)) == budget
        assert unbounded.model_extra["reasoning_content"].startswith(reasoning)
        assert message.content  # the answer follows


def test_thinking_switched_off_in_the_prompt_leaves_no_reasoning(glm45_server):
    request = {"model": "glm", "messages": [{"role": "user", "content": "Hi."}], "temperature": 0, "max_tokens": 8}
    client = glm45_server.openai()
    assert client.chat.completions.create(**request).choices[0].message.model_extra["reasoning_content"]
    message = client.chat.completions.create(
        **request, extra_body={"chat_template_kwargs": {"enable_thinking": False}}).choices[0].message
    assert message.content and "reasoning_content" not in (message.model_extra or {})


@needs_xgrammar
def test_a_schema_constrains_only_the_answer_after_free_thinking(glm45_server):
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}}, "required": ["answer"],
              "additionalProperties": False}
    message = glm45_server.openai().chat.completions.create(
        model="glm", messages=[{"role": "user", "content": "Count."}], temperature=0, max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "count", "schema": schema}},
        extra_body={"thinking_token_budget": 6}).choices[0].message
    assert message.model_extra["reasoning_content"]  # free text, not JSON
    jsonschema.validate(json.loads(message.content), schema)


def test_a_budget_or_a_request_template_the_server_does_not_allow_is_a_400(glm45_server):
    body = {"model": "glm", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    refused = httpx.post(glm45_server.url + "/v1/chat/completions", json={**body, "chat_template": "x"}, timeout=30)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "chat_template"
    assert "trust_request_chat_template" in refused.json()["error"]["message"]
    negative = httpx.post(glm45_server.url + "/v1/chat/completions", json={**body, "thinking_token_budget": -1},
                          timeout=30)
    assert negative.status_code == 400 and "thinking_token_budget" in negative.text
    with pytest.raises(APIError) as unparsed:  # a server without a reasoning parser cannot count thinking
        request_thinking(None, AutoTokenizer.from_pretrained(glm45_server.state.config.engine.model.model),
                         ThinkingPhase.OPEN, 5)
    assert unparsed.value.body.error.param == "thinking_token_budget"
    assert "--reasoning-parser" in unparsed.value.body.error.message


def test_earlier_reasoning_goes_back_to_the_template(tokenizer):
    history = [{"role": "user", "content": "Weather?"},
               {"role": "assistant", "content": None, "reasoning_content": "Call the tool.", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    rendered = render_chat_prompt(tokenizer, [ChatMessage.model_validate(m) for m in history], ChatRendering(),
                                  PromptCharLimit.of(tokenizer, 512), tools=TOOLS)
    text = tokenizer.decode(rendered.token_ids)
    assert "<think>Call the tool.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Rome" in text


def test_the_content_format_gives_templates_text_or_parts(tokenizer):
    loops = "{% for m in messages %}{% for part in m.content %}[{{ part.text }}]{% endfor %}{% endfor %}"
    message = ChatMessage.model_validate({"role": "user", "content": [{"type": "text", "text": "a"},
                                                                      {"type": "text", "text": "b"}]})
    rendered = render_chat_prompt(tokenizer, [message], ChatRendering(add_generation_prompt=False,
                                  chat_template=loops, content_format="openai"), PromptCharLimit.of(tokenizer, 512))
    assert tokenizer.decode(rendered.token_ids) == "[a][b]"


@pytest.mark.parametrize(("setting", "known"), [("reasoning_parser", "glm45, qwen3, deepseek_r1"),
                                                 ("tool_call_parser", "glm45, glm47")])
def test_an_unknown_parser_name_stops_the_start_listing_the_known_ones(setting, known):
    with pytest.raises(ConfigError, match=f"{setting}.*{known}"):
        ServerState(AutoGLMConfig(**{setting: "nope"}).server_config())
