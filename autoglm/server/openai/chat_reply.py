"""Reading a chat reply back out of the model's text: the thinking apart from the answer, then the tool
calls out of the answer, whole or as a stream of deltas."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autoglm.server.openai.responses import AssistantMessage, FunctionCall, ToolCall
from autoglm.server.reasoning.registry import ReasoningParserSpec
from autoglm.server.reasoning.stream import ReasoningStream
from autoglm.server.tool_calls.argument_check import arguments_match
from autoglm.server.tool_calls.json_closing import json_closing
from autoglm.server.tool_calls.parsed import ParsedOutput, new_tool_call_id
from autoglm.server.tool_calls.stream import CallPiece, StreamPiece, ToolCallStream, visible_content
from autoglm.server.tool_calls.tool_use import ToolUse
from autoglm.thinking import ThinkingPhase


@dataclass(frozen=True)
class ReplyReading:
    """How one request's replies are read: its reasoning parser and this turn's thinking phase (None: the
    thinking, if any, stays content), and its use of tools (None: no calls are read)."""

    reasoning: ReasoningParserSpec | None = None
    phase: ThinkingPhase = ThinkingPhase.NOT_BEGUN
    include_reasoning: bool = True  # vLLM's include_reasoning: false reads the thinking out and drops it
    tool_use: ToolUse | None = None
    on_malformed_call: Callable[[], None] = lambda: None  # counts a call the model wrote wrong

    @property
    def reads_calls(self) -> bool:
        return self.tool_use is not None and self.tool_use.new_parser is not None

    def whole(self, text: str, finish_reason: str | None) -> tuple[AssistantMessage, bool]:
        """The reply's message, and whether it made calls. A call the model wrote wrong (left open when it
        stopped, an undeclared tool, arguments its schema refuses) leaves the answer as plain content."""
        reasoning, answer = self._split(text)
        if not self.reads_calls:
            return self._message(reasoning, answer), False
        parsed = self.tool_use.new_parser().parse(answer, final=True)
        if not parsed.calls:
            return self._message(reasoning, parsed.content), False
        if self.malformed(parsed, finish_reason):
            self.on_malformed_call()
            return self._message(reasoning, answer), False
        calls = [ToolCall(id=new_tool_call_id(), function=FunctionCall(name=call.name, arguments=call.arguments))
                 for call in parsed.calls]
        message = self._message(reasoning, visible_content(parsed, final=True) or None)
        message.tool_calls = calls
        return message, True

    def new_stream(self) -> ReplyStream:
        return ReplyStream(self)

    def _split(self, text: str) -> tuple[str | None, str]:
        if self.reasoning is None:
            return None, text
        split = self.reasoning.new_parser(self.phase).parse(text, final=True)
        return split.reasoning, split.content

    def _message(self, reasoning: str | None, content: str | None) -> AssistantMessage:
        """A reply that was all thinking has no content (null, as for a reply of calls alone)."""
        shown = reasoning if reasoning and self.include_reasoning else None
        return AssistantMessage(content=content or None if reasoning else content, reasoning_content=shown,
                                reasoning=shown)

    def malformed(self, parsed: ParsedOutput, finish_reason: str | None) -> bool:
        """Whether a call the model chose to make ("auto") was written wrong; a call cut off by max_tokens is
        not: the reply ends with finish_reason "length" and the call as far as it went."""
        if self.tool_use is None or self.tool_use.constraint is not None:
            return False  # a grammar wrote the calls
        if finish_reason != "length" and any(not call.complete for call in parsed.calls):
            return True
        schemas = self.tool_use.schemas
        return any(call.complete and not arguments_match(call.arguments, schemas.get(call.name))
                   for call in parsed.calls)


@dataclass
class ReplyPiece:
    reasoning: str
    content: str
    calls: list[CallPiece] = field(default_factory=list)


class ReplyStream:
    """One choice's reply as it streams: each piece of text split into new thinking, new answer and new
    pieces of calls. Calls go out as they are written; a malformed one is counted once the choice ends,
    and one left open is closed as it was sent (its arguments completed into JSON)."""

    def __init__(self, reading: ReplyReading) -> None:
        self._reading = reading
        self._thinking = (ReasoningStream(reading.reasoning.new_parser(reading.phase))
                          if reading.reasoning is not None else None)
        self._calls = ToolCallStream(reading.tool_use.new_parser()) if reading.reads_calls else None
        self._answer = ""

    @property
    def made_calls(self) -> bool:
        return self._calls is not None and self._calls.made_calls

    def advance(self, text: str, finish_reason: str | None) -> ReplyPiece:
        final = finish_reason is not None
        reasoning, answer = self._thinking.advance(text, final) if self._thinking is not None else ("", text)
        if not self._reading.include_reasoning:
            reasoning = ""
        if self._calls is None:
            return ReplyPiece(reasoning, answer)
        self._answer += answer
        piece: StreamPiece = self._calls.advance(answer, final)
        reply = ReplyPiece(reasoning, piece.content, piece.calls)
        if final:
            self._finish(reply, finish_reason)
        return reply

    def _finish(self, reply: ReplyPiece, finish_reason: str | None) -> None:
        parsed = self._reading.tool_use.new_parser().parse(self._answer, final=True)
        if not parsed.calls or not self._reading.malformed(parsed, finish_reason):
            return
        self._reading.on_malformed_call()
        last = parsed.calls[-1]
        if self.made_calls and not last.complete and finish_reason != "length":
            closing = json_closing(last.arguments)
            if closing:
                reply.calls.append(CallPiece(len(parsed.calls) - 1, closing))
