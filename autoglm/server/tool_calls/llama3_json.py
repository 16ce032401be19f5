"""Llama 3.1 and 3.2 JSON calls: the reply is the call, {"name": ..., "parameters": {...}}, after an
optional <|python_tag|>; several calls are separated by semicolons."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoglm.server.tool_calls.json_scan import json_object_end, scan_json_call
from autoglm.server.tool_calls.parsed import ParsedOutput, skip_whitespace

PYTHON_TAG = "<|python_tag|>"


class Llama3JsonToolCallParser:
    """Calls only open the reply; text after the last call is content, and a reply that does not
    open with a call (to a declared tool) is all content."""

    def __init__(self, tools: Mapping[str, dict[str, Any] | None]) -> None:
        self._names = frozenset(tools)

    def parse(self, text: str, final: bool) -> ParsedOutput:
        calls = []
        pos = skip_whitespace(text, 0)
        if text.startswith(PYTHON_TAG, pos):
            pos = skip_whitespace(text, pos + len(PYTHON_TAG))
        content_start = 0
        while (scanned := scan_json_call(text, pos)) is not None and scanned.call.name in self._names:
            calls.append(scanned.call)
            if scanned.end is None:
                return ParsedOutput("", calls)
            content_start = scanned.end
            pos = skip_whitespace(text, scanned.end)
            if text.startswith(";", pos):
                pos = skip_whitespace(text, pos + 1)
            elif pos < len(text):
                break
        if not final and _may_open_call(text, pos):
            return ParsedOutput("", calls)
        return ParsedOutput(text[content_start:], calls)


def _may_open_call(text: str, pos: int) -> bool:
    """Whether the text from `pos` may still turn out to be a call, once more of it is written."""
    rest = text[pos:]
    if PYTHON_TAG.startswith(rest):  # nothing yet, or part of the tag
        return True
    return rest.startswith("{") and json_object_end(text, pos) is None
