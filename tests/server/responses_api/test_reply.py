"""The Response builder on its own: a failure mid-stream ends the stream with OpenAI's error event, then
response.failed carrying the error, the events numbered on from those already sent."""
from __future__ import annotations

import json
from http import HTTPStatus

from autoglm.server.openai.chat import ChatReplyContext
from autoglm.server.openai.chat_reply import ReplyReading
from autoglm.server.openai.errors import APIError
from autoglm.server.responses_api.protocol import ResponsesRequest
from autoglm.server.responses_api.reply import ResponsesReply, request_echo


def event_data(events: list[str]) -> list[dict]:
    return [json.loads(event.split("data: ", 1)[1]) for event in events]


def test_a_failure_mid_stream_ends_with_error_then_response_failed():
    context = ChatReplyContext(request_id="chatcmpl-abc123", created=1, model="glm", num_logprobs=None,
                               tokenizer=None, reading=ReplyReading())
    reply = ResponsesReply(context, request_echo(ResponsesRequest.model_validate({"input": "Hi"})), False)
    opening = reply.opening_events()
    failure = reply.error_events(APIError(HTTPStatus.GATEWAY_TIMEOUT, "too slow", code="request_timeout"))
    assert [event.split("\n", 1)[0] for event in opening + failure] == [
        "event: response.created", "event: response.in_progress", "event: error", "event: response.failed"]
    created, _, error, failed = event_data(opening + failure)
    assert [data["sequence_number"] for data in (created, error, failed)] == [0, 2, 3]
    assert created["response"]["id"] == failed["response"]["id"] == "resp_abc123"
    assert (error["code"], error["message"]) == ("request_timeout", "too slow")
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "server_error", "message": "too slow"}
    assert reply.finished is None  # nothing to store
