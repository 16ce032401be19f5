"""A chat reply answered as Anthropic's message: whole, or as its stream of named events.

The chat side's reading of the reply (its thinking, its answer, its tool calls) becomes the message's content
blocks, in the order the model wrote them: a thinking block, a text block, then a tool_use block per call.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from autoglm.outputs import CompletionOutput, RequestOutput
from autoglm.server.anthropic.errors import anthropic_error
from autoglm.server.anthropic.responses import (
    ContentBlock,
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    InputJSONDelta,
    MessageDelta,
    MessageResponse,
    MessageStart,
    MessageStop,
    MessageUsage,
    Ping,
    SignatureDelta,
    StopDelta,
    StopReason,
    StreamEvent,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolUseContent,
)
from autoglm.server.openai.chat import ChatReplyContext
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.responses import UsageInfo
from autoglm.server.openai.streaming import ChoiceDelta, sse_event
from autoglm.server.tool_calls.json_closing import json_closing


class MessageBuilder:
    """The ResponseBuilder of the Messages API (see openai/generation.py). A stream's message_start waits for the
    first delta, which carries the prompt's token counts its usage needs; each block is started as the first
    piece of its kind arrives and stopped as the next one starts, or as the message ends."""

    def __init__(self, context: ChatReplyContext, stop_sequences: Sequence[str] = ()) -> None:
        self._context = context
        self._stop_sequences = stop_sequences
        self._id = f"msg_{context.request_id.rpartition('-')[2]}"  # the request's id, in Anthropic's form
        self._stream = context.reading.new_stream()
        self._started = False
        self._blocks_started = 0
        self._open_type: str | None = None  # the open block's type; the open block is the last started
        self._call_blocks: dict[int, int] = {}  # each call's block index, by the call's index in the reply
        self._stop: tuple[StopReason | None, str | None] = (None, None)

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> MessageResponse:
        (output,) = outputs  # one conversation
        (completion,) = output.outputs  # one reply: the Messages API has no n
        message, made_calls = self._context.reading.whole(completion.text, completion.finish_reason)
        content: list[ContentBlock] = []
        if message.reasoning_content:
            content.append(ThinkingContent(thinking=message.reasoning_content))
        if message.content:
            content.append(TextContent(text=message.content))
        content.extend(ToolUseContent(id=_tool_use_id(call.id), name=call.function.name,
                                      input=_tool_input(call.function.arguments)) for call in message.tool_calls or [])
        stop_reason, stop_sequence = self._stop_of(completion, made_calls)
        return self._message(content, stop_reason, stop_sequence, _usage(usage))

    def opening_events(self) -> list[str]:
        return []  # message_start comes with the first delta

    def delta_events(self, delta: ChoiceDelta, output: RequestOutput) -> list[str]:
        events = [] if self._started else self._start(len(output.prompt_token_ids), output.num_cached_tokens)
        piece = self._stream.advance(delta.text, delta.finish_reason)
        if piece.reasoning:
            events += self._enter(ThinkingContent(thinking=""))
            events.append(self._delta(ThinkingDelta(thinking=piece.reasoning)))
        if piece.content:
            events += self._enter(TextContent(text=""))
            events.append(self._delta(TextDelta(text=piece.content)))
        for call in piece.calls:
            if call.id is not None:  # a call's first piece: a block of its own
                events += self._close() + self._open(ToolUseContent(id=_tool_use_id(call.id), name=call.name or "",
                                                                    input={}))
                self._call_blocks[call.index] = self._blocks_started - 1
            if call.arguments:
                events.append(_event(ContentBlockDelta(index=self._call_blocks[call.index],
                                                       delta=InputJSONDelta(partial_json=call.arguments))))
        if delta.finish_reason is not None:
            completion = next(completion for completion in output.outputs if completion.index == delta.index)
            self._stop = self._stop_of(completion, self._stream.made_calls)
        return events

    def closing_events(self, usage: UsageInfo, include_usage: bool) -> list[str]:
        """The last block's stop, then the message's: why it stopped and its usage, which Anthropic always sends
        (so `include_usage`, OpenAI's stream option, changes nothing)."""
        cached = usage.prompt_tokens_details.cached_tokens
        events = [] if self._started else self._start(usage.prompt_tokens, cached)
        stop_reason, stop_sequence = self._stop
        return events + self._close() + [
            _event(MessageDelta(delta=StopDelta(stop_reason=stop_reason, stop_sequence=stop_sequence),
                                usage=_usage(usage))),
            _event(MessageStop()),
        ]

    def error_events(self, error: APIError) -> list[str]:
        return [sse_event(anthropic_error(error.status, error.body.error.message).model_dump_json(), "error")]

    def _message(self, content: list[ContentBlock], stop_reason: StopReason | None, stop_sequence: str | None,
                 usage: MessageUsage) -> MessageResponse:
        return MessageResponse(id=self._id, model=self._context.model, content=content, stop_reason=stop_reason,
                               stop_sequence=stop_sequence, usage=usage)

    def _start(self, prompt_tokens: int, cached_tokens: int) -> list[str]:
        self._started = True
        usage = MessageUsage(input_tokens=prompt_tokens - cached_tokens, output_tokens=0,
                             cache_read_input_tokens=cached_tokens)
        return [_event(MessageStart(message=self._message([], None, None, usage))), _event(Ping())]

    def _enter(self, block: ThinkingContent | TextContent) -> list[str]:
        """Open a block of `block`'s type unless one is open already."""
        return [] if self._open_type == block.type else self._close() + self._open(block)

    def _open(self, block: ContentBlock) -> list[str]:
        index = self._blocks_started
        self._blocks_started += 1
        self._open_type = block.type
        return [_event(ContentBlockStart(index=index, content_block=block))]

    def _close(self) -> list[str]:
        if self._open_type is None:
            return []
        events = [self._delta(SignatureDelta())] if self._open_type == "thinking" else []
        self._open_type = None
        return events + [_event(ContentBlockStop(index=self._blocks_started - 1))]

    def _delta(self, delta: TextDelta | ThinkingDelta | SignatureDelta) -> str:
        return _event(ContentBlockDelta(index=self._blocks_started - 1, delta=delta))

    def _stop_of(self, completion: CompletionOutput, made_calls: bool) -> tuple[StopReason, str | None]:
        """Anthropic's stop reason and, for one of the request's stop sequences, the sequence; a reply cut off by
        max_tokens is "max_tokens" even when it was making calls."""
        if completion.finish_reason == "length":
            return "max_tokens", None
        if made_calls:
            return "tool_use", None
        if isinstance(completion.stop_reason, str) and completion.stop_reason in self._stop_sequences:
            return "stop_sequence", completion.stop_reason
        return "end_turn", None


def _event(event: StreamEvent) -> str:
    """An event named, as Anthropic names each, by its type."""
    return sse_event(event.model_dump_json(), event.type)


def _usage(usage: UsageInfo) -> MessageUsage:
    cached = usage.prompt_tokens_details.cached_tokens
    return MessageUsage(input_tokens=usage.prompt_tokens - cached, output_tokens=usage.completion_tokens,
                        cache_read_input_tokens=cached)


def _tool_use_id(call_id: str) -> str:
    """A call's id in Anthropic's form: the chat side's ``call_...`` as ``toolu_...``."""
    return f"toolu_{call_id.removeprefix('call_')}"


def _tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object a tool_use block's input is: a call cut off by max_tokens closed where it
    stopped, and empty when what it wrote cannot be closed into an object."""
    try:
        value = json.loads(arguments + json_closing(arguments))
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
