"""Finding where a JSON object ends in text still being written, and calls written as JSON objects."""
from __future__ import annotations

import re

from autoglm.server.tool_calls.parsed import ReadCall, ToolCallText

# The start of a call written {"name": ..., "arguments": {...}} (Llama 3.1 says "parameters"), up to
# the arguments' opening brace: enough to know the call's name before its arguments are written.
_CALL_HEAD = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:\s*(?=\{)')


def json_object_end(text: str, start: int) -> int | None:
    """The index just past the object or array opened at ``text[start]``, or None when the text ends
    before it closes. Brackets inside strings do not count."""
    depth, in_string, escaped = 0, False, False
    for pos in range(start, len(text)):
        char = text[pos]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return pos + 1
    return None


def scan_json_call(text: str, start: int) -> ReadCall | None:
    """The call written as a JSON object at ``text[start]``, its arguments as far as they go; None
    when the text there is not (or not yet) the head of such a call."""
    head = _CALL_HEAD.match(text, start)
    if head is None:
        return None
    arguments_end = json_object_end(text, head.end())
    if arguments_end is None:
        return ReadCall(ToolCallText(head[1], text[head.end():]), None)
    end = json_object_end(text, start)
    return ReadCall(ToolCallText(head[1], text[head.end():arguments_end], complete=end is not None), end)
