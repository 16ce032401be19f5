"""Thinking, tool calls and stop sequences through the Messages API and the official anthropic client.

A scripted runner stands in for a GLM-4.5-format model and writes given transcripts (see
tests/server/test_thinking_served.py); the server reads them with the glm45 reasoning parser, so the test controls
exactly what the model says, and sees exactly the prompt it was given.
"""
from __future__ import annotations

import json

import httpx
import pytest
from transformers import AutoTokenizer

from tests.engine.scripted_engine import TranscriptRunner, scripted_engine
from tests.optional_packages import import_client
from tests.server.live_server import start_server
from tests.thinking_model import make_glm45_chat_model

anthropic = import_client("anthropic", "anthropic")

pytestmark = pytest.mark.timeout(120)

MODEL = "glm"
THINK_THEN_ANSWER = "<think>Plan: greet back.</think>Hi there."
THINK_THEN_CALL = ("<think>Need the weather.</think>Let me check.<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                   "<arg_value>Zürich</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>")
WEATHER_TOOL = {"name": "get_weather", "description": "The weather in a city", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}
HELLO = [{"role": "user", "content": "Hello"}]
THINKING = {"type": "enabled", "budget_tokens": 100}
NO_THINKING = {"type": "disabled"}
DERIVED_EVENTS = {"text", "thinking", "signature", "input_json", "citation"}


class PromptRecordingRunner(TranscriptRunner):
    """Also keeps the prompt of the last sequence it wrote a token for."""

    def __init__(self, vocab_size: int, eos_token_id: int) -> None:
        super().__init__(vocab_size, eos_token_id)
        self.last_prompt: list[int] = []

    def next_token_at(self, seq, position: int) -> int:
        self.last_prompt = seq.token_ids[:seq.num_prompt_tokens]
        return super().next_token_at(seq, position)


@pytest.fixture(scope="module")
def glm45_model(tmp_path_factory):
    return make_glm45_chat_model(tmp_path_factory.mktemp("tiny-glm45-messages"))


@pytest.fixture(scope="module")
def tokenizer(glm45_model):
    return AutoTokenizer.from_pretrained(glm45_model)


@pytest.fixture(scope="module")
def scripted(glm45_model, tokenizer):
    runner = PromptRecordingRunner(len(tokenizer), tokenizer.eos_token_id)
    server = start_server(glm45_model,
                          load_engine=lambda: scripted_engine(256, runner, glm45_model, max_context_len=512),
                          served_model_name=MODEL, max_context_len=512, reasoning_parser="glm45")
    yield server, runner
    server.stop()


@pytest.fixture
def say(scripted, tokenizer):
    """Script what the model writes next."""
    def script(transcript: str) -> None:
        scripted[1].scripts = [tokenizer.encode(transcript, add_special_tokens=False)]
    return script


@pytest.fixture
def client(scripted):
    return anthropic.Anthropic(base_url=scripted[0].url, api_key="unused", max_retries=0, timeout=60)


def streamed(client, **request) -> tuple[list, object]:
    """The raw events of a streamed message, and the message the client accumulated from them."""
    with client.messages.stream(**request) as stream:
        events = [event for event in stream if event.type not in DERIVED_EVENTS]
        return events, stream.get_final_message()


def blocks(message) -> list[tuple[str, str]]:
    """Each content block's type and text (its thinking, for a thinking block)."""
    return [(block.type, block.thinking if block.type == "thinking" else block.text) for block in message.content]


def outline(events: list) -> list[str]:
    """The events' types with each run of deltas to one block as one entry: "thinking_delta", "text_delta", ..."""
    kinds = []
    for event in events:
        kind = event.delta.type if event.type == "content_block_delta" else event.type
        if event.type == "content_block_start":
            kind += f":{event.content_block.type}"
        if not kinds or kinds[-1] != kind or event.type != "content_block_delta":
            kinds.append(kind)
    return kinds


def test_thinking_is_a_thinking_block_before_the_text_whole_and_streamed(client, say):
    say(THINK_THEN_ANSWER)
    message = client.messages.create(model=MODEL, max_tokens=50, messages=HELLO, thinking=THINKING)
    assert blocks(message) == [("thinking", "Plan: greet back."), ("text", "Hi there.")]
    assert message.content[0].signature == "" and message.stop_reason == "end_turn"
    events, accumulated = streamed(client, model=MODEL, max_tokens=50, messages=HELLO, thinking=THINKING)
    assert outline(events) == ["message_start", "content_block_start:thinking", "thinking_delta", "signature_delta",
                               "content_block_stop", "content_block_start:text", "text_delta", "content_block_stop",
                               "message_delta", "message_stop"]
    assert [event.index for event in events if event.type == "content_block_start"] == [0, 1]
    assert blocks(accumulated) == blocks(message) and accumulated.stop_reason == "end_turn"


def test_thinking_omitted_from_the_answer_or_turned_off(client, say, scripted, tokenizer):
    say(THINK_THEN_ANSWER)
    omitted = client.messages.create(model=MODEL, max_tokens=50, messages=HELLO,
                                     thinking={**THINKING, "display": "omitted"})
    assert blocks(omitted) == [("text", "Hi there.")]
    say("Hi there.")
    assert client.messages.create(model=MODEL, max_tokens=50, messages=HELLO,
                                  thinking=NO_THINKING).content[0].text == "Hi there."
    assert tokenizer.decode(scripted[1].last_prompt).endswith("<|assistant|>\n<think></think>")


def test_a_call_the_model_makes_is_a_tool_use_block_after_its_thinking_and_text(client, say):
    say(THINK_THEN_CALL)
    request = {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": "Weather in Zürich?"}],
               "tools": [WEATHER_TOOL], "thinking": THINKING}
    message = client.messages.create(**request)
    assert message.stop_reason == "tool_use"
    thinking, text, call = message.content
    assert (thinking.thinking, text.text) == ("Need the weather.", "Let me check.")
    assert call.type == "tool_use" and call.id.startswith("toolu_") and call.name == "get_weather"
    assert call.input == {"city": "Zürich", "days": 3}
    events, accumulated = streamed(client, **request)
    starts = [(event.index, event.content_block.type) for event in events if event.type == "content_block_start"]
    assert starts == [(0, "thinking"), (1, "text"), (2, "tool_use")]
    assert "input_json_delta" in outline(events) and accumulated.stop_reason == "tool_use"
    assert accumulated.content[2].input == call.input and accumulated.content[2].name == "get_weather"


def test_a_tool_result_round_trip_renders_as_the_equivalent_chat_conversation(client, say, scripted, tokenizer):
    history = [
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Need the weather.", "signature": ""},
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Zürich"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
    ]
    chat = [
        {"role": "user", "content": "Weather in Zürich?"},
        {"role": "assistant", "content": "Let me check.", "reasoning_content": "Need the weather.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": "Zürich"})}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    ]
    say("<think>It is sunny.</think>Sunny in Zürich.")
    message = client.messages.create(model=MODEL, max_tokens=50, messages=history)
    assert message.content[-1].text == "Sunny in Zürich."
    server = scripted[0]
    tokenized = httpx.post(server.url + "/tokenize", json={"model": MODEL, "messages": chat}, timeout=60).json()
    assert scripted[1].last_prompt == tokenized["tokens"]
    assert client.messages.count_tokens(model=MODEL, messages=history).input_tokens == tokenized["count"]
    prompt = tokenizer.decode(tokenized["tokens"])
    assert "<think>Need the weather.</think>\nLet me check.\n<tool_call>get_weather" in prompt
    assert "<|observation|>\n<tool_response>\nsunny\n</tool_response><|assistant|>" in prompt


def test_count_tokens_counts_the_tools_and_the_thinking_switch(client, scripted):
    server = scripted[0]

    def tokenize(**extra) -> int:
        return httpx.post(server.url + "/tokenize", json={"model": MODEL, "messages": HELLO, **extra},
                          timeout=60).json()["count"]

    assert client.messages.count_tokens(model=MODEL, messages=HELLO).input_tokens == tokenize()
    assert client.messages.count_tokens(model=MODEL, messages=HELLO, thinking=NO_THINKING).input_tokens == tokenize(
        chat_template_kwargs={"enable_thinking": False})
    with_tools = client.messages.count_tokens(model=MODEL, messages=HELLO, tools=[WEATHER_TOOL]).input_tokens
    assert with_tools > tokenize()  # the template lists the tools


def test_a_stop_sequence_ends_the_message_and_is_named(client, say):
    say("one two STOP three")
    request = {"model": MODEL, "max_tokens": 50, "messages": HELLO, "thinking": NO_THINKING,
               "stop_sequences": ["NEVER", "STOP"]}
    message = client.messages.create(**request)
    assert (message.content[0].text, message.stop_reason, message.stop_sequence) == ("one two ", "stop_sequence",
                                                                                       "STOP")
    events, accumulated = streamed(client, **request)
    (delta,) = [event for event in events if event.type == "message_delta"]
    assert (delta.delta.stop_reason, delta.delta.stop_sequence) == ("stop_sequence", "STOP")
    assert accumulated.content[0].text == "one two "


def test_max_tokens_cuts_the_message(client, say):
    say("one two three four five six seven eight")
    message = client.messages.create(model=MODEL, max_tokens=3, messages=HELLO, thinking=NO_THINKING)
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 3


def test_a_call_cut_by_max_tokens_keeps_the_input_written_so_far(client, say, tokenizer):
    say(THINK_THEN_CALL)
    cut = len(tokenizer.encode(THINK_THEN_CALL.split("<arg_key>days")[0], add_special_tokens=False))
    message = client.messages.create(model=MODEL, max_tokens=cut, tools=[WEATHER_TOOL], thinking=THINKING,
                                     messages=[{"role": "user", "content": "Weather in Zürich?"}])
    assert message.stop_reason == "max_tokens"
    assert (message.content[-1].type, message.content[-1].input) == ("tool_use", {"city": "Zürich"})
