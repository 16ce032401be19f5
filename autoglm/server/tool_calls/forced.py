"""Reading the calls out of output a grammar forced into shape (tool_choice "required" or a named function)."""
from __future__ import annotations

import re

from autoglm.server.tool_calls.json_scan import json_object_end, scan_json_call
from autoglm.server.tool_calls.parsed import ParsedOutput, ToolCallText, skip_whitespace


class NamedFunctionParser:
    """The output is the named function's arguments object: its name is known before any text."""

    def __init__(self, name: str) -> None:
        self._name = name

    def parse(self, text: str, final: bool) -> ParsedOutput:
        complete = json_object_end(text, skip_whitespace(text, 0)) is not None
        return ParsedOutput("", [ToolCallText(self._name, text, complete)])


# A call whose name is written in full, its arguments not yet begun: the grammar writes the name first.
_NAMED_CALL_HEAD = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"')


class CallArrayParser:
    """The output is a JSON array of {"name": ..., "arguments": {...}} objects (tool_choice "required").

    A call counts from the moment its name is written, as a named function's does from its first
    character: a reply cut off by max_tokens keeps its last call, its arguments as far as they go.
    """

    def parse(self, text: str, final: bool) -> ParsedOutput:
        calls = []
        pos = skip_whitespace(text, 0)
        if text.startswith("[", pos):
            pos = skip_whitespace(text, pos + 1)
            while (scanned := scan_json_call(text, pos)) is not None:
                calls.append(scanned.call)
                if scanned.end is None:
                    break
                pos = skip_whitespace(text, scanned.end)
                if not text.startswith(",", pos):
                    break
                pos = skip_whitespace(text, pos + 1)
            else:  # the text at pos is no call whose arguments have begun
                named = _NAMED_CALL_HEAD.match(text, pos)
                if named is not None:
                    calls.append(ToolCallText(named[1], ""))
        return ParsedOutput("", calls)
