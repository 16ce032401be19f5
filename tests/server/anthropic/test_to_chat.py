"""A Messages request as the chat request it amounts to, field by field (no server: the translation alone)."""
from __future__ import annotations

import pytest

from autoglm.server.anthropic.protocol import CountTokensRequest, MessagesRequest
from autoglm.server.anthropic.to_chat import chat_request, counting_request

TOOL = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


def chat(**fields) -> dict:
    request = MessagesRequest.model_validate({"model": "m", "max_tokens": 9, **fields})
    return chat_request(request).model_dump(exclude_none=True, exclude_defaults=True, by_alias=True)


def test_system_images_and_tool_results_become_chat_messages_in_place():
    translated = chat(system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}], messages=[
        {"role": "user", "content": [
            {"type": "text", "text": "Look:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "opaque"}, {"type": "thinking", "thinking": "Call it."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "is_error": False},
            {"type": "text", "text": "Thanks."}]},
    ])
    messages = translated["messages"]
    assert [message["role"] for message in messages] == ["system", "user", "assistant", "tool", "user"]
    assert messages[0]["content"] == [{"type": "text", "text": "Be brief."}]
    assert [part["type"] for part in messages[1]["content"]] == ["text", "image_url", "image_url"]
    assistant = messages[2]
    assert assistant["reasoning_content"] == "Call it." and "content" not in assistant
    assert assistant["tool_calls"] == [{"id": "toolu_1", "type": "function",
                                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}
    request = MessagesRequest.model_validate({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]}]})
    (part,) = chat_request(request).messages[0].content
    assert part.image_url.url == "data:image/png;base64,iVBO"


def test_sampling_fields_user_and_output_format():
    translated = chat(messages=[{"role": "user", "content": "Hi"}], stop_sequences=["END"], temperature=0.5, top_p=0.9,
                      top_k=5, stream=True, metadata={"user_id": "u-1"},
                      output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}})
    assert {name: translated[name] for name in ("max_tokens", "stop", "temperature", "top_p", "top_k", "stream",
                                                "user")} == {"max_tokens": 9, "stop": ["END"], "temperature": 0.5,
                                                             "top_p": 0.9, "top_k": 5, "stream": True, "user": "u-1"}
    assert translated["response_format"] == {"type": "json_schema",
                                             "json_schema": {"name": "output", "schema": {"type": "object"}}}


def test_a_last_assistant_turn_is_continued():
    translated = chat(messages=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Well,"}])
    assert translated["continue_final_message"] is True and translated["add_generation_prompt"] is False


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, {"tool_choice": "auto"}),
    ({"type": "auto", "disable_parallel_tool_use": True}, {"tool_choice": "auto", "parallel_tool_calls": False}),
    ({"type": "any"}, {"tool_choice": "required"}),
    ({"type": "tool", "name": "get_weather"},
     {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    ({"type": "none"}, {"tool_choice": "none"}),
])
def test_tool_choice(choice, expected):
    translated = chat(messages=[{"role": "user", "content": "Hi"}], tools=[TOOL], tool_choice=choice)
    assert {name: translated[name] for name in expected} == expected
    assert translated["tools"] == [{"type": "function", "function": {"name": "get_weather",
                                                                     "parameters": TOOL["input_schema"]}}]


@pytest.mark.parametrize(("thinking", "expected"), [
    ({"type": "enabled", "budget_tokens": 2048},
     {"chat_template_kwargs": {"enable_thinking": True}, "thinking_token_budget": 2048}),
    ({"type": "adaptive", "display": "omitted"},
     {"chat_template_kwargs": {"enable_thinking": True}, "include_reasoning": False}),
    ({"type": "disabled"}, {"chat_template_kwargs": {"enable_thinking": False}}),
])
def test_thinking_controls(thinking, expected):
    translated = chat(messages=[{"role": "user", "content": "Hi"}], thinking=thinking)
    assert {name: translated[name] for name in expected} == expected
    assert ("thinking_token_budget" in translated) == ("budget_tokens" in thinking)


def test_count_tokens_renders_the_same_prompt_fields():
    fields = {"model": "m", "system": "S", "messages": [{"role": "user", "content": "Hi"}], "tools": [TOOL],
              "thinking": {"type": "disabled"}}
    counted = counting_request(CountTokensRequest.model_validate(fields))
    created = chat_request(MessagesRequest.model_validate({**fields, "max_tokens": 9}))
    assert counted.messages == created.messages and counted.tools == created.tools
    assert counted.chat_template_kwargs == created.chat_template_kwargs
