"""One choice's tool calls streamed as OpenAI streams them: each call's id, type and name first,
then pieces of its arguments, with the text outside calls as content."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.server.tool_calls.parsed import ParsedOutput, ToolCallParser, new_tool_call_id


@dataclass
class CallPiece:
    index: int  # of the call within the choice
    arguments: str
    id: str | None = None  # with the name, in the call's first piece only
    name: str | None = None


@dataclass
class StreamPiece:
    content: str
    calls: list[CallPiece] = field(default_factory=list)


def visible_content(parsed: ParsedOutput, final: bool) -> str:
    """The content a client is shown: blank text (the newlines around calls) only in a reply that
    turned out to hold no call, so that a reply of calls alone has no content."""
    if parsed.content.strip() or (final and not parsed.calls):
        return parsed.content
    return ""


class ToolCallStream:
    """Feeds a choice's text to its parser as it grows and sends only what is new."""

    def __init__(self, parser: ToolCallParser) -> None:
        self._parser = parser
        self._text = ""
        self._content_sent = ""
        self._arguments_sent: list[str] = []

    @property
    def made_calls(self) -> bool:
        return bool(self._arguments_sent)

    def advance(self, text: str, final: bool) -> StreamPiece:
        """What `text`, the choice's next text, adds; `final` once the choice has finished."""
        self._text += text
        parsed = self._parser.parse(self._text, final)
        piece = StreamPiece(extension(self._content_sent, visible_content(parsed, final)))
        self._content_sent += piece.content
        for index, call in enumerate(parsed.calls):
            if index == len(self._arguments_sent):
                piece.calls.append(CallPiece(index, call.arguments, new_tool_call_id(), call.name))
                self._arguments_sent.append(call.arguments)
                continue
            more = extension(self._arguments_sent[index], call.arguments)
            if more:
                piece.calls.append(CallPiece(index, more))
                self._arguments_sent[index] += more
        return piece


def extension(sent: str, now: str) -> str:
    """What `now` adds to `sent`. A parser's answers only grow; text that malformed output made it
    take back is not sent again."""
    return now[len(sent):] if now.startswith(sent) else ""
