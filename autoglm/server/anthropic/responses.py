"""Answer bodies and stream events of the Messages API, field for field as Anthropic sends them."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

# Why a message ended: its natural end, max_tokens, one of the request's stop_sequences, or calls to run.
StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class TextContent(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ThinkingContent(BaseModel):
    """The model's thinking; its signature is empty, as nothing here signs thinking (and none is checked)."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class ToolUseContent(BaseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


ContentBlock = TextContent | ThinkingContent | ToolUseContent


class MessageUsage(BaseModel):
    """Anthropic counts prompt tokens read from its cache apart from the rest, so ``input_tokens`` are the
    prompt's tokens the prefix cache did not hold and ``cache_read_input_tokens`` those it did; nothing is
    written to a cache on request, so ``cache_creation_input_tokens`` is 0."""

    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int = 0


class MessageResponse(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[ContentBlock]
    stop_reason: StopReason | None
    stop_sequence: str | None
    usage: MessageUsage


class MessageStart(BaseModel):
    """The stream's first event: the message with no content yet, and the prompt's usage."""

    type: Literal["message_start"] = "message_start"
    message: MessageResponse


class Ping(BaseModel):
    type: Literal["ping"] = "ping"


class ContentBlockStart(BaseModel):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ContentBlock  # empty: its text, thinking or input follow in deltas


class TextDelta(BaseModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class ThinkingDelta(BaseModel):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


class SignatureDelta(BaseModel):
    """Sent as a thinking block ends, as Anthropic's clients wait for it; empty, as ThinkingContent's."""

    type: Literal["signature_delta"] = "signature_delta"
    signature: str = ""


class InputJSONDelta(BaseModel):
    """The next piece of a tool_use block's input, as JSON text (whole once the block stops)."""

    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ContentBlockDelta(BaseModel):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: TextDelta | ThinkingDelta | SignatureDelta | InputJSONDelta


class ContentBlockStop(BaseModel):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class StopDelta(BaseModel):
    stop_reason: StopReason | None
    stop_sequence: str | None


class MessageDelta(BaseModel):
    """The message's end: why it stopped, and its usage (output tokens, and the prompt's as message_start had)."""

    type: Literal["message_delta"] = "message_delta"
    delta: StopDelta
    usage: MessageUsage


class MessageStop(BaseModel):
    type: Literal["message_stop"] = "message_stop"


StreamEvent = (MessageStart | Ping | ContentBlockStart | ContentBlockDelta | ContentBlockStop | MessageDelta
               | MessageStop)
