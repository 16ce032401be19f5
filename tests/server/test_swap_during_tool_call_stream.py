"""A promote while a chat tool call streams: the call streams whole from the version it started on (every
chunk a valid OpenAI chunk naming that version), its arguments valid and equal to that version's unswapped
answer; the next request goes to the promoted version."""
from __future__ import annotations

import json
import threading

import httpx
import jsonschema
import pytest
from openai.types.chat import ChatCompletionChunk

from tests.optional_packages import needs_xgrammar
from tests.server.model_versions import MODEL, operate, serve_registry

HANG_S = 60  # only to catch a hang

pytestmark = [pytest.mark.timeout(4 * HANG_S), needs_xgrammar]

PARAMETERS = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
              "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["celsius", "fahrenheit"]}}}
REQUEST = {"model": MODEL, "messages": [{"role": "user", "content": "Weather in Paris?"}], "temperature": 0,
           "max_tokens": 120, "tools": [{"type": "function", "function": {"name": "get_weather",
                                                                           "parameters": PARAMETERS}}],
           "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}


@pytest.fixture
def served(registry_dir):
    running = serve_registry(registry_dir, kv_cache_memory="8MiB")
    yield running
    running.stop()


def hold_after_first_token(engine, monkeypatch) -> threading.Event:
    """Every step of `engine` after the first that produced an output waits until the event is set."""
    release, step, token_out = threading.Event(), engine.step, threading.Event()

    def held_step():
        if token_out.is_set():
            release.wait(HANG_S)
        outputs = step()
        if outputs:
            token_out.set()
        return outputs

    monkeypatch.setattr(engine, "step", held_step)
    return release


def test_a_tool_call_streamed_through_a_promote_ends_whole_on_its_version(served, monkeypatch):
    client = served.openai()
    unswapped = client.chat.completions.create(**REQUEST).choices[0].message.tool_calls[0].function
    (version_1,) = [held for held in served.state.pool.held() if held.version == "1"]
    release = hold_after_first_token(version_1.engine.engine, monkeypatch)
    with httpx.stream("POST", served.url + "/v1/chat/completions", json={**REQUEST, "stream": True},
                      timeout=HANG_S) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert served.state.pool.in_flight(f"{MODEL}@1") == 1  # held: the call is surely mid-stream
        assert operate(served.url, "promote", version="2").status_code == 200
        release.set()
        payloads = [first.removeprefix("data: ")] + [line.removeprefix("data: ") for line in lines
                                                     if line.startswith("data: ")]
    assert payloads.pop() == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(json.loads(payload)) for payload in payloads]
    assert {chunk.model for chunk in chunks} == {f"{MODEL}@1"}
    deltas = [call for chunk in chunks for choice in chunk.choices for call in choice.delta.tool_calls or []]
    assert [call.function.name for call in deltas if call.function.name] == ["get_weather"]
    arguments = json.loads("".join(call.function.arguments or "" for call in deltas))
    jsonschema.validate(arguments, PARAMETERS)
    assert arguments == json.loads(unswapped.arguments)
    assert [choice.finish_reason for chunk in chunks for choice in chunk.choices if choice.finish_reason] == ["stop"]
    after = client.chat.completions.create(**REQUEST)
    assert after.model == f"{MODEL}@2"
    # The versions' weights differ, and so do their calls: the stream's match tells which version wrote it.
    assert json.loads(after.choices[0].message.tool_calls[0].function.arguments) != arguments
