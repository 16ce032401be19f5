"""Tool calls through the official openai client: forced calls whatever the model, and the requests refused
(a tool whose parameters would not compile, whatever tool_choice)."""
from __future__ import annotations

import asyncio
import json
import math
import re

import jsonschema
import openai
import pytest
from transformers import AutoTokenizer

from autoglm.engine.tokenize import PromptCharLimit
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.protocol import ChatCompletionRequest, ChatMessage
from autoglm.server.openai.chat_prompt import ChatRendering, render_chat_prompt
from autoglm.server.tool_calls.tool_schemas import check_tool_schemas
from autoglm.server.tool_calls.tool_use import plan_tool_use
from tests.optional_packages import needs_xgrammar
from tests.server.live_server import make_chat_model, start_server
from tests.server.test_errors import assert_still_serving, error_of, post
from tests.server.tool_calls.templates import QWEN_TEMPLATE

pytestmark = [pytest.mark.timeout(120), needs_xgrammar]

MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]
# Bounded, so that a random model must close every value.
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
TIME_PARAMETERS = {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"],
                   "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": WEATHER_PARAMETERS}},
    {"type": "function", "function": {"name": "get_time", "parameters": TIME_PARAMETERS}},
]
PARAMETERS = {"get_weather": WEATHER_PARAMETERS, "get_time": TIME_PARAMETERS}
SAMPLED = {"temperature": 1.0, "max_tokens": 120}


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory):
    folder = make_chat_model(tmp_path_factory.mktemp("tiny-qwen-tools"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = QWEN_TEMPLATE
    tokenizer.save_pretrained(folder)
    running = start_server(folder, served_model_name="tiny-qwen", max_context_len=512, kv_cache_memory="8MiB")
    yield running
    running.stop()


def assert_valid_call(call, names: set[str]) -> None:
    assert call.type == "function" and call.id.startswith("call_") and call.function.name in names
    jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])


@pytest.mark.parametrize("seed", range(5))
def test_a_named_function_is_called_with_valid_arguments(qwen_server, seed):
    chat = qwen_server.openai().chat.completions.create(
        model="tiny-qwen", messages=MESSAGES, tools=TOOLS, seed=seed,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, **SAMPLED)
    choice = chat.choices[0]
    assert choice.finish_reason == "stop" and choice.message.content is None  # as OpenAI answers a named choice
    (call,) = choice.message.tool_calls
    assert_valid_call(call, {"get_weather"})


@pytest.mark.parametrize("seed", range(5))
def test_required_calls_one_of_the_tools_and_only_one_without_parallel_calls(qwen_server, seed):
    chat = qwen_server.openai().chat.completions.create(
        model="tiny-qwen", messages=MESSAGES, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
        seed=seed, **SAMPLED)
    choice = chat.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert_valid_call(call, {"get_weather", "get_time"})


def streamed_calls(chunks) -> tuple[dict[int, list[dict[str, str]]], dict[int, str | None]]:
    """Each choice's calls as its deltas build them (a call's first delta names it; later ones only add to its
    arguments), and each choice's last finish reason."""
    calls: dict[int, dict[int, dict[str, str]]] = {}
    finish_reasons: dict[int, str | None] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            finish_reasons[choice.index] = choice.finish_reason
            own = calls.setdefault(choice.index, {})
            for delta in choice.delta.tool_calls or []:
                if delta.id is not None:  # a call's first delta: id, type and name
                    assert delta.index not in own and delta.type == "function"
                    own[delta.index] = {"name": delta.function.name, "arguments": ""}
                else:
                    assert delta.function.name is None
                own[delta.index]["arguments"] += delta.function.arguments
    return {index: list(own.values()) for index, own in calls.items()}, finish_reasons


def as_dicts(calls) -> list[dict[str, str]]:
    return [{"name": call.function.name, "arguments": call.function.arguments} for call in calls or []]


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_a_streamed_forced_call_matches_the_whole_answer(qwen_server, tool_choice):
    client = qwen_server.openai()
    request = {"model": "tiny-qwen", "messages": MESSAGES, "tools": TOOLS, "tool_choice": tool_choice,
               "parallel_tool_calls": False, "seed": 3, **SAMPLED}
    whole = client.chat.completions.create(**request).choices[0]
    calls, finish_reasons = streamed_calls(client.chat.completions.create(**request, stream=True))
    assert calls[0] == as_dicts(whole.message.tool_calls)
    assert finish_reasons[0] == whole.finish_reason == ("tool_calls" if tool_choice == "required" else "stop")


def test_forced_calls_stream_for_each_of_n_choices(qwen_server):
    client = qwen_server.openai()
    request = {"model": "tiny-qwen", "messages": MESSAGES, "tools": TOOLS, "tool_choice": "required", "n": 3,
               "seed": 5, **SAMPLED}
    whole = client.chat.completions.create(**request)
    calls, finish_reasons = streamed_calls(client.chat.completions.create(**request, stream=True))
    assert sorted(calls) == [choice.index for choice in whole.choices] == [0, 1, 2]
    for choice in whole.choices:
        assert calls[choice.index] == as_dicts(choice.message.tool_calls) and calls[choice.index]
        assert finish_reasons[choice.index] == choice.finish_reason == "tool_calls"
        for call in calls[choice.index]:
            jsonschema.validate(json.loads(call["arguments"]), PARAMETERS[call["name"]])


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_a_forced_call_cut_off_by_max_tokens_keeps_its_partial_call(qwen_server, tool_choice):
    client = qwen_server.openai()
    request = {"model": "tiny-qwen", "messages": MESSAGES, "tools": TOOLS, "tool_choice": tool_choice,
               "parallel_tool_calls": False, "seed": 3, **SAMPLED}
    answer = client.chat.completions.create(**request, logprobs=True).choices[0]
    (whole,) = answer.message.tool_calls
    # The tokens that end the call's name ("required" writes it; a named function's call has it from the start).
    written = b""
    for named_at, token in enumerate(answer.logprobs.content, 1):
        written += bytes(token.bytes)
        if tool_choice != "required" or re.search(rb'"name"\s*:\s*"\w+"', written):
            break
    for max_tokens in (named_at, named_at + 4):
        choice = client.chat.completions.create(**{**request, "max_tokens": max_tokens}).choices[0]
        assert choice.finish_reason == "length"
        (cut,) = choice.message.tool_calls
        assert cut.function.name == whole.function.name
        assert whole.function.arguments.startswith(cut.function.arguments)
        assert len(cut.function.arguments) < len(whole.function.arguments)


# A Qwen model's own call, written out by a grammar since a random model never writes one: "auto" must read it.
SERVED_CALL = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>'


@pytest.mark.parametrize("before", ["", "Let me look.\n"])
def test_auto_reads_a_call_the_model_writes_whole_and_streamed(qwen_server, before):
    client = qwen_server.openai()
    request = {"model": "tiny-qwen", "messages": MESSAGES, "tools": TOOLS, "max_tokens": 200, "temperature": 0,
               "extra_body": {"guided_choice": [before + SERVED_CALL]}}
    choice = client.chat.completions.create(**request).choices[0]
    assert choice.finish_reason == "tool_calls"
    assert as_dicts(choice.message.tool_calls) == [{"name": "get_time", "arguments": '{"zone": "CET"}'}]
    assert choice.message.content == (before or None)
    calls, finish_reasons = streamed_calls(client.chat.completions.create(**request, stream=True))
    assert calls[0] == as_dicts(choice.message.tool_calls) and finish_reasons[0] == "tool_calls"


def test_auto_reads_the_templates_format_and_leaves_text_as_content(qwen_server):
    chat = qwen_server.openai().chat.completions.create(
        model="tiny-qwen", messages=MESSAGES, tools=TOOLS, max_tokens=8, temperature=0)
    choice = chat.choices[0]
    # A random model does not write <tool_call> blocks: its text is all content.
    assert choice.message.tool_calls is None and choice.message.content and choice.finish_reason == "length"


def test_a_tool_result_goes_back_through_the_template(qwen_server):
    history = [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius", "days": 1}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 degrees"},
    ]
    tokenizer = AutoTokenizer.from_pretrained(qwen_server.state.config.engine.model.model)
    rendered = tokenizer.decode(render_chat_prompt(tokenizer, [ChatMessage.model_validate(m) for m in history],
                                                   ChatRendering(), PromptCharLimit.of(tokenizer, 512),
                                                   tools=[TOOLS[0]]).token_ids)
    assert "<tools>get_weather</tools>" in rendered  # the tools, for the model to read
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 1}}' in rendered
    assert "<tool_response>\nsunny, 21 degrees\n</tool_response>" in rendered
    chat = qwen_server.openai().chat.completions.create(model="tiny-qwen", messages=history, tools=TOOLS,
                                                        max_tokens=4, temperature=0)
    assert chat.choices[0].finish_reason == "length"


@pytest.mark.parametrize("exclude_none", [False, True])
def test_a_call_appended_as_the_client_returned_it_goes_back_with_its_result(qwen_server, exclude_none):
    client = qwen_server.openai()
    reply = client.chat.completions.create(
        model="tiny-qwen", messages=MESSAGES, tools=TOOLS, seed=1,
        tool_choice={"type": "function", "function": {"name": "get_time"}}, **SAMPLED).choices[0].message
    history = [*MESSAGES, reply.model_dump(exclude_none=exclude_none),
               {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "noon"}]
    again = client.chat.completions.create(model="tiny-qwen", messages=history, tools=TOOLS, max_tokens=4,
                                           temperature=0, extra_body={"ignore_eos": True})
    assert again.choices[0].finish_reason == "length"


@pytest.mark.parametrize("body, param, words", [
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_news"}}}, "tool_choice",
     "tool_choice names the function 'get_news', which tools does not declare; declared: 'get_weather', 'get_time'"),
    ({"tool_choice": "required"}, "tool_choice", "the request declares no tools"),
    ({"tools": [{"type": "function", "function": {"name": "get weather"}}]}, "tools",
     "a function name must be 1 to 64 letters, digits, underscores or dashes"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]}, "tools",
     'parameters must be the JSON schema of an object ("type": "object")'),
    ({"tools": [{"type": "retrieval", "function": {"name": "f"}}]}, "tools", "tools.0.type"),
    ({"tools": [TOOLS[0], TOOLS[0]]}, "tools", "declares the function 'get_weather' more than once"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "strnig"}}}}}], "tool_choice": "required"},
     "tools[0].function.parameters", 'tools[0].function.parameters does not compile: Unsupported type "strnig"'),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice",
     "tool_choice forces a tool call, whose shape its grammar sets, and response_format also constrains"),
])
def test_bad_tools_are_400_naming_the_field(qwen_server, body, param, words):
    response = post(qwen_server, "/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2, **body})
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["param"] == param and words in error["message"]
    assert_still_serving(qwen_server)


def test_auto_is_refused_for_a_template_that_teaches_no_known_call_format(server):
    response = post(server, "/v1/chat/completions", json={"messages": MESSAGES, "tools": TOOLS, "max_tokens": 2})
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == "tool_choice" and "use tool_choice 'required' or name a function" in error["message"]
    forced = server.openai().chat.completions.create(model="tiny-llama", messages=MESSAGES, tools=TOOLS,
                                                      tool_choice="required", parallel_tool_calls=False, **SAMPLED)
    assert forced.choices[0].message.tool_calls[0].function.name in PARAMETERS
    with pytest.raises(openai.BadRequestError):
        server.openai().chat.completions.create(model="tiny-llama", messages=MESSAGES, tools=TOOLS, max_tokens=2)


def tool(name: str, parameters: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


UNKNOWN_TYPE = {"type": "object", "properties": {"a": {"type": "strnig"}}}
UNENFORCEABLE = {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}


@pytest.mark.parametrize("tool_choice", [None, "none", "auto", "required",
                                         {"type": "function", "function": {"name": "get_time"}}])
@pytest.mark.parametrize("parameters, words", [
    (UNKNOWN_TYPE, 'tools[2].function.parameters does not compile: Unsupported type "strnig"'),
    (UNENFORCEABLE, "tools[2].function.parameters: the schema uses 'not' (at /properties/a), which the grammar "
                    "cannot enforce"),
])
def test_every_tool_schema_is_checked_whatever_tool_choice(qwen_server, tool_choice, parameters, words):
    body = {"messages": MESSAGES, "max_tokens": 2, "tools": [*TOOLS, tool("broken", parameters)]}
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    error = error_of(post(qwen_server, "/v1/chat/completions", json=body))
    assert (error["param"], error["code"]) == ("tools[2].function.parameters", "invalid_value")
    assert error["message"].startswith(words)
    assert_still_serving(qwen_server)


def counting_compiles(engine, monkeypatch) -> list[object]:
    """Each constraint the engine is asked to compile from now on, cached or not."""
    asked = []
    compile_grammar = engine.compile_grammar

    def counted(constraint):
        asked.append(constraint)
        return compile_grammar(constraint)

    monkeypatch.setattr(engine, "compile_grammar", counted)
    return asked


MANY_TOOLS = [tool(f"tool_{i}", {"type": "object", "properties": {f"field_{i}": {"type": "integer"}}})
              for i in range(200)]


def test_many_tools_under_auto_cost_one_grammar_the_forced_call_then_reuses(qwen_server, monkeypatch):
    engine = qwen_server.state.engine.engine
    asked = counting_compiles(engine, monkeypatch)
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, "tools": MANY_TOOLS})
    asyncio.run(check_tool_schemas(engine, request))
    forced = plan_tool_use(request.model_copy(update={"tool_choice": "required"}), QWEN_TEMPLATE).constraint
    assert [constraint.cache_key() for constraint in asked] == [forced.cache_key()]


def test_the_failing_tool_among_many_is_found_in_a_few_compiles(qwen_server, monkeypatch):
    engine = qwen_server.state.engine.engine
    asked = counting_compiles(engine, monkeypatch)
    tools = [*MANY_TOOLS[:137], tool("broken", UNKNOWN_TYPE), *MANY_TOOLS[137:]]
    request = ChatCompletionRequest.model_validate({"messages": MESSAGES, "tools": tools, "tool_choice": "none"})
    with pytest.raises(APIError) as caught:
        asyncio.run(check_tool_schemas(engine, request))
    assert caught.value.body.error.param == "tools[137].function.parameters"
    # The whole set, halves of it (log2 of 201 rounded up), then the culprit alone.
    assert len(asked) <= 1 + math.ceil(math.log2(len(tools))) + 1
