"""What a tool-call parser reads out of a model's text, and the interface every parser shares."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol


@dataclass
class ToolCallText:
    name: str
    arguments: str  # the arguments' JSON text; while the call is still being written, a prefix of it
    complete: bool = False  # its closing marker (for calls written as JSON, the closing brace) was read


@dataclass
class ReadCall:
    """A call read out of text as far as the text goes, and where the text after it starts."""

    call: ToolCallText
    end: int | None  # just past the call's closing marker or brace; None while the call is still open


@dataclass
class ParsedOutput:
    content: str  # the text outside calls
    calls: list[ToolCallText] = field(default_factory=list)


class ToolCallParser(Protocol):
    """Splits a model's text into content and tool calls.

    With ``final`` false the text is a prefix of what the model will write, and the answer must only
    grow as more arrives: text that may yet turn out to open a call is held back (neither content nor
    call), and a call counts as one from the moment its name is known. Streaming relies on this, and
    so the same text parsed whole gives exactly what its stream gave.
    """

    def parse(self, text: str, final: bool) -> ParsedOutput: ...


class FirstCallOnly:
    """A parser's answers with only the first call (``parallel_tool_calls: false`` under "auto",
    where the model, not a grammar, decides how many calls it writes): later calls are dropped."""

    def __init__(self, parser: ToolCallParser) -> None:
        self._parser = parser

    def parse(self, text: str, final: bool) -> ParsedOutput:
        parsed = self._parser.parse(text, final)
        return ParsedOutput(parsed.content, parsed.calls[:1])


def new_tool_call_id() -> str:
    """An id in OpenAI's shape, unique enough for a client to match tool results to calls."""
    return f"call_{uuid.uuid4().hex[:24]}"


def held_back_length(text: str, marker: str) -> int:
    """Characters at the end of `text` that could be the start of `marker`, to hold back until the
    next characters tell whether the marker follows."""
    for length in range(min(len(marker) - 1, len(text)), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0


def next_call_start(text: str, pos: int, marker: str, final: bool, parsed: ParsedOutput) -> int | None:
    """Where the next `marker` opening a call starts at or after `pos`, the text before it added to
    `parsed`'s content; None where none follows, the rest added instead, short of what may be the
    marker's start while the text still grows."""
    start = text.find(marker, pos)
    if start < 0:
        rest = text[pos:]
        parsed.content += rest if final else rest[:len(rest) - held_back_length(rest, marker)]
        return None
    parsed.content += text[pos:start]
    return start


def skip_whitespace(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos
