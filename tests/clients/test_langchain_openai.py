"""langchain-openai's ChatOpenAI as users write it: invoke, stream, a forced tool through bind_tools (and the
call's result sent back), and with_structured_output(method="json_schema")."""
from __future__ import annotations

import jsonschema
import pytest

from tests.clients.replies import (GREEDY, MODEL, PROMPT, STRUCTURED_MAX_TOKENS, Weather, get_weather,
                                   openai_reply)
from tests.optional_packages import import_client, needs_xgrammar

langchain_openai = import_client("langchain_openai", "langchain-openai")
messages = import_client("langchain_core.messages", "langchain-core")

pytestmark = pytest.mark.timeout(120)


def chat_model(server, **settings: object):
    return langchain_openai.ChatOpenAI(model=MODEL, base_url=server.url + "/v1", api_key="unused", max_retries=0,
                                       **{**GREEDY, **settings})


def test_invoke_reads_the_reply_the_openai_client_gets(client_server):
    reply, expected = chat_model(client_server).invoke(PROMPT), openai_reply(client_server)
    assert reply.content == expected.choices[0].message.content
    assert reply.response_metadata["model_name"] == MODEL
    assert reply.response_metadata["finish_reason"] == expected.choices[0].finish_reason
    assert reply.usage_metadata["output_tokens"] == expected.usage.completion_tokens


def test_stream_joins_to_the_same_reply_with_usage_at_the_end(client_server):
    chunks = list(chat_model(client_server, stream_usage=True).stream(PROMPT))
    expected = openai_reply(client_server)
    assert len(chunks) > 2  # token by token, not one blob
    whole = sum(chunks[1:], chunks[0])
    assert whole.content == expected.choices[0].message.content
    assert whole.usage_metadata["output_tokens"] == expected.usage.completion_tokens


@needs_xgrammar
def test_bind_tools_with_a_forced_tool_calls_it_and_takes_its_result_back(client_server):
    model = chat_model(client_server, max_tokens=STRUCTURED_MAX_TOKENS).bind_tools([Weather], tool_choice="Weather")
    history = [messages.HumanMessage(PROMPT)]
    reply = model.invoke(history)
    (call,) = reply.tool_calls
    assert call["name"] == "Weather" and not reply.invalid_tool_calls
    jsonschema.validate(call["args"], Weather.model_json_schema())
    answer = get_weather(call["args"]["city"], call["args"]["unit"])
    history += [reply, messages.ToolMessage(answer, tool_call_id=call["id"])]
    follow_up = chat_model(client_server).invoke(history)  # the history as langchain writes it is accepted
    assert isinstance(follow_up.content, str) and follow_up.response_metadata["finish_reason"] in ("stop", "length")


@needs_xgrammar
def test_with_structured_output_json_schema_returns_a_valid_object(client_server):
    model = chat_model(client_server, max_tokens=STRUCTURED_MAX_TOKENS).with_structured_output(
        Weather, method="json_schema")
    weather = model.invoke(PROMPT)
    assert isinstance(weather, Weather)
    jsonschema.validate(weather.model_dump(), Weather.model_json_schema())
