"""The Response of one request, whole or streamed: the builder the chat route is given (see ResponseBuilder).

The chat side has already read the reply's thinking, text and calls (``ChatReplyContext.reading``); this
builder only puts them in the Responses API's shapes. A response's id is its request's (``resp_`` and the
hex of the ``chatcmpl-`` id its log line names), and ``finished`` holds it once it is complete, for the
route to store.
"""
from __future__ import annotations

import time
from http import HTTPStatus

from pydantic import BaseModel

from autoglm.outputs import RequestOutput
from autoglm.server.openai.chat import ChatReplyContext
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.responses import UsageInfo
from autoglm.server.openai.streaming import ChoiceDelta
from autoglm.server.responses_api.objects import (
    IncompleteDetails,
    ItemStatus,
    OutputItem,
    RequestEcho,
    ResponseError,
    ResponseObject,
    ResponseStatus,
    ResponseUsage,
)
from autoglm.server.responses_api.protocol import ReasoningConfig, ResponsesRequest
from autoglm.server.responses_api.reply_items import whole_output
from autoglm.server.responses_api.reply_stream import EventNumbers, StreamedOutput
from autoglm.server.responses_api.usage import response_usage, thinking_tokens

# What `include` names to have the thinking in a form a later request may send back.
ENCRYPTED_THINKING = "reasoning.encrypted_content"
# The engine's reason for a reply cut off at max_output_tokens (or the end of the context).
CUT_OFF = "length"
# The codes of OpenAI's ResponseError, by the status a failure is answered with.
_FAILURE_CODES = {HTTPStatus.TOO_MANY_REQUESTS: "rate_limit_exceeded", HTTPStatus.BAD_REQUEST: "invalid_prompt"}


def response_id(request_id: str) -> str:
    """``resp_`` and the hex of the request's own id (``chatcmpl-<hex>``)."""
    return "resp_" + request_id.partition("-")[2]


def request_echo(body: ResponsesRequest) -> RequestEcho:
    """What the Response repeats of `body`, each default as OpenAI states it."""
    reasoning = body.reasoning or ReasoningConfig()
    text_format = body.text.format if body.text is not None else None
    tool_choice = body.tool_choice or "auto"
    return RequestEcho(
        instructions=body.instructions,
        max_output_tokens=body.max_output_tokens,
        metadata=body.metadata or {},
        parallel_tool_calls=body.parallel_tool_calls is not False,
        previous_response_id=body.previous_response_id,
        reasoning={"effort": reasoning.effort, "summary": reasoning.summary or reasoning.generate_summary},
        store=body.keeps,
        temperature=body.temperature,
        text={"format": (text_format.model_dump(mode="json", by_alias=True, exclude_none=True)
                         if text_format is not None else {"type": "text"})},
        tool_choice=tool_choice.model_dump(mode="json") if isinstance(tool_choice, BaseModel) else tool_choice,
        tools=[tool.model_dump(mode="json") for tool in body.tools or []],
        top_p=body.top_p,
        user=body.user,
    )


class ResponsesReply:
    """Builds one request's Response: whole, or as the Responses API's stream events."""

    def __init__(self, context: ChatReplyContext, echo: RequestEcho, shows_encrypted: bool) -> None:
        """`shows_encrypted`: whether the request included ENCRYPTED_THINKING."""
        self.id = response_id(context.request_id)
        self.finished: ResponseObject | None = None
        self._context = context
        self._echo = echo
        self._shows_encrypted = shows_encrypted
        self._events = EventNumbers()
        self._output = StreamedOutput(self._events, shows_encrypted)
        self._stream = context.reading.new_stream()
        self._token_ids: list[int] = []
        self._thinking = ""
        self._finish_reason: str | None = None

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> ResponseObject:
        (output,) = outputs
        (completion,) = output.outputs  # a Responses request asks for one answer
        reading = self._context.reading
        message, _ = reading.whole(completion.text, completion.finish_reason)
        items = whole_output(message, _item_status(completion.finish_reason), self._shows_encrypted)
        thinking = thinking_tokens(completion.token_ids, message.reasoning_content or "", reading,
                                   self._context.tokenizer)
        self.finished = self._ended(completion.finish_reason, items, response_usage(usage, thinking))
        return self.finished

    def opening_events(self) -> list[str]:
        started = self._snapshot("in_progress", []).model_dump(mode="json")
        return [self._events.event("response.created", response=started),
                self._events.event("response.in_progress", response=started)]

    def delta_events(self, delta: ChoiceDelta, output: RequestOutput) -> list[str]:
        piece = self._stream.advance(delta.text, delta.finish_reason)
        self._token_ids += delta.token_ids
        self._thinking += piece.reasoning
        self._finish_reason = delta.finish_reason or self._finish_reason
        return self._output.advance(piece)

    def closing_events(self, usage: UsageInfo, include_usage: bool) -> list[str]:
        """The items' ends, then the whole Response, with its usage whatever `include_usage` says."""
        events = self._output.finish(_item_status(self._finish_reason))
        thinking = thinking_tokens(self._token_ids, self._thinking, self._context.reading, self._context.tokenizer)
        self.finished = self._ended(self._finish_reason, self._output.items(), response_usage(usage, thinking))
        return events + [self._events.event(f"response.{self.finished.status}",
                                            response=self.finished.model_dump(mode="json"))]

    def error_events(self, error: APIError) -> list[str]:
        """OpenAI's ``error`` event, then ``response.failed`` with the items as far as they went."""
        info = error.body.error
        failed = self._snapshot("failed", self._output.items(), error=ResponseError(
            code=_FAILURE_CODES.get(error.status, "server_error"), message=info.message))
        return [self._events.event("error", code=info.code, message=info.message, param=info.param),
                self._events.event("response.failed", response=failed.model_dump(mode="json"))]

    def _ended(self, finish_reason: str | None, items: list[OutputItem], usage: ResponseUsage) -> ResponseObject:
        if finish_reason == CUT_OFF:
            return self._snapshot("incomplete", items, usage=usage,
                                  incomplete_details=IncompleteDetails(reason="max_output_tokens"))
        return self._snapshot("completed", items, usage=usage, completed_at=int(time.time()))

    def _snapshot(self, status: ResponseStatus, items: list[OutputItem], **fields: object) -> ResponseObject:
        return ResponseObject(**self._echo.model_dump(), id=self.id, created_at=self._context.created, status=status,
                              model=self._context.model, output=items, **fields)


def _item_status(finish_reason: str | None) -> ItemStatus:
    return "incomplete" if finish_reason == CUT_OFF else "completed"
