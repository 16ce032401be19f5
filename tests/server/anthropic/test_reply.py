"""The Messages API's reply builder on its own: stop reasons, a call's input, and the events no live model easily
gives (an error mid-stream, a stream that ends before any delta)."""
from __future__ import annotations

import json
from http import HTTPStatus

import pytest

from autoglm.outputs import CompletionOutput, RequestMetrics, RequestOutput
from autoglm.server.anthropic.reply import MessageBuilder
from autoglm.server.openai.chat import ChatReplyContext
from autoglm.server.openai.chat_reply import ReplyReading
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.responses import PromptTokensDetails, UsageInfo

USAGE = UsageInfo(prompt_tokens=10, completion_tokens=3, total_tokens=13,
                  prompt_tokens_details=PromptTokensDetails(cached_tokens=4))


def builder(stop_sequences: tuple[str, ...] = ()) -> MessageBuilder:
    context = ChatReplyContext("chatcmpl-0123abcd", 0, "tiny", None, None, ReplyReading())
    return MessageBuilder(context, stop_sequences)


def output(finish_reason: str, stop_reason: str | int | None) -> RequestOutput:
    completion = CompletionOutput(0, "Hi", [5, 6, 7], finish_reason=finish_reason, stop_reason=stop_reason)
    return RequestOutput("r", None, list(range(10)), [completion], True, RequestMetrics(0.0))


@pytest.mark.parametrize(("finish_reason", "stop_reason", "expected"), [
    ("length", None, ("max_tokens", None)),
    ("stop", "END", ("stop_sequence", "END")),
    ("stop", "</s>", ("end_turn", None)),  # a stop string the request did not ask for
    ("stop", 7, ("end_turn", None)),  # a stop token
    ("stop", None, ("end_turn", None)),  # EOS
])
def test_the_stop_reason_and_the_sequence_matched(finish_reason, stop_reason, expected):
    message = builder(("END",)).response([output(finish_reason, stop_reason)], USAGE)
    assert (message.stop_reason, message.stop_sequence) == expected
    assert message.id == "msg_0123abcd" and message.content[0].text == "Hi"
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens, message.usage.output_tokens) == (6, 4, 3)


def events(frames: list[str]) -> list[tuple[str, dict]]:
    parsed = []
    for frame in frames:
        name, data = frame.strip().split("\n")
        parsed.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return parsed


def test_an_error_mid_stream_is_an_error_event_in_anthropics_shape():
    ((name, body),) = events(builder().error_events(APIError(HTTPStatus.SERVICE_UNAVAILABLE, "engine stopped")))
    assert name == "error" and body == {"type": "error",
                                        "error": {"type": "overloaded_error", "message": "engine stopped"}}


def test_a_stream_closed_before_any_delta_still_opens_and_closes_the_message():
    closing = events(builder().closing_events(USAGE, include_usage=False))
    assert [name for name, _ in closing] == ["message_start", "ping", "message_delta", "message_stop"]
    assert closing[0][1]["message"]["usage"]["input_tokens"] == 6
    assert closing[2][1]["usage"]["output_tokens"] == 3
