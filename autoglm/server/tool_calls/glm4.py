"""GLM-4 (GLM-4-9B-Chat, GLM-4-0414): a call is the function's name on a line of its own, then its
arguments as a JSON object, written where the reply starts."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoglm.server.tool_calls.json_scan import json_object_end
from autoglm.server.tool_calls.parsed import ParsedOutput, ToolCallText, skip_whitespace


class Glm4ToolCallParser:
    """Only a declared tool's name opens a call, so a reply whose first line happens to be followed
    by JSON stays text; the text after the last call is content."""

    def __init__(self, tools: Mapping[str, dict[str, Any] | None]) -> None:
        self._names = frozenset(tools)

    def parse(self, text: str, final: bool) -> ParsedOutput:
        calls: list[ToolCallText] = []
        pos = content_start = 0
        while True:
            start = skip_whitespace(text, pos)
            line_end = text.find("\n", start)
            if line_end < 0:
                if not final and any(name.startswith(text[start:]) for name in self._names):
                    return ParsedOutput("", calls)
                break
            name = text[start:line_end].strip()
            if name not in self._names:
                break
            arguments_start = skip_whitespace(text, line_end + 1)
            if arguments_start == len(text) and not final:
                return ParsedOutput("", calls)
            if not text.startswith("{", arguments_start):
                break
            arguments_end = json_object_end(text, arguments_start)
            calls.append(ToolCallText(name, text[arguments_start:arguments_end], complete=arguments_end is not None))
            if arguments_end is None:
                return ParsedOutput("", calls)
            pos = content_start = arguments_end
        return ParsedOutput(text[content_start:], calls)
