"""The routing key: the leading characters of a generation request's prompt, however the prompt is given."""
from __future__ import annotations

import json

import pytest

from autoglm.server.ray_serve.routing_key import routing_key


def body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


def test_a_completion_is_keyed_by_its_prompts_first_characters():
    assert routing_key("/v1/completions", body(prompt="ROMEO: what light", max_tokens=4), 8) == "ROMEO: w"
    assert routing_key("/v1/completions", body(prompt="short"), 8) == "short"


def test_prompts_sharing_their_first_characters_share_a_key_and_others_do_not():
    document = "A long document every user asks about. " * 4
    first = routing_key("/v1/completions", body(prompt=document + "Who wrote it?"), 64)
    second = routing_key("/v1/completions", body(prompt=document + "When?"), 64)
    other = routing_key("/v1/completions", body(prompt="Another document. " + document), 64)
    assert first == second != other


def test_a_batch_is_keyed_by_its_first_prompt_and_token_ids_by_their_numbers():
    assert routing_key("/v1/completions", body(prompt=["first prompt", "second"]), 5) == "first"
    assert routing_key("/v1/completions", body(prompt=[17, 4, 250]), 100) == "17 4 250"
    assert routing_key("/v1/completions", body(prompt=[[17, 4], [9]]), 100) == "17 4"


def test_anthropic_messages_and_responses_are_keyed_by_their_system_text_then_turns():
    system = [{"type": "text", "text": "You write code."}]
    turns = [{"role": "user", "content": [{"type": "text", "text": "Fix it"}]}]
    messages = routing_key("/v1/messages", body(system=system, messages=turns, max_tokens=8), 1000)
    assert messages == "You write code.user\nFix it\n"
    again = routing_key("/v1/messages", body(system="You write code.", messages=[*turns, turns[0]], max_tokens=8), 16)
    assert again == messages[:16]
    assert routing_key("/v1/responses", body(instructions="Be brief.", input="Fix it"), 1000) == "Be brief.Fix it"
    assert routing_key("/v1/responses", body(input=turns), 1000) == "user\nFix it\n"


def test_a_chat_is_rendered_message_after_message():
    messages = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}]}]
    key = routing_key("/v1/chat/completions", body(messages=messages), 1000)
    assert key == "system\nYou are terse.\nuser\nHi!\n"
    longer = routing_key("/v1/chat/completions", body(messages=[*messages, {"role": "assistant", "content": "Hey"}]),
                         1000)
    assert longer.startswith(key)  # a chat that goes on shares its earlier turns' prefix


@pytest.mark.parametrize("path, raw", [
    ("/health", b""),
    ("/v1/models", b""),
    ("/tokenize", body(prompt="text")),
    ("/v1/completions", b"not json"),
    ("/v1/completions", b"\xff\xfe"),
    ("/v1/completions", b"[1, 2]"),
    ("/v1/completions", body(max_tokens=3)),
    ("/v1/chat/completions", body(messages="not a list")),
    ("/v1/chat/completions", body(messages=[])),
])
def test_requests_without_a_usable_prompt_have_no_key(path, raw):
    assert routing_key(path, raw, 64) is None
