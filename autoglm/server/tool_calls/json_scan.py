"""Finding where a JSON object ends in text still being written, and calls written as JSON objects."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from autoglm.server.tool_calls.parsed import ReadCall, ToolCallText

# The start of a call written {"name": ..., "arguments": {...}} (Llama 3.1 says "parameters"), up to
# the arguments' opening brace: enough to know the call's name before its arguments are written.
_CALL_HEAD = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:\s*(?=\{)')


_CLOSERS = {"{": "}", "[": "]"}


@dataclass
class JsonScan:
    """How far a JSON object or array written from some start goes: just past its close (``end``), or,
    while it is still open, the closers it awaits (innermost last) and whether a string is open."""

    end: int | None
    awaited: list[str] = field(default_factory=list)
    in_string: bool = False
    escaped: bool = False  # the open string's last character is a lone backslash


def scan_json(text: str, start: int) -> JsonScan:
    """Scan the object or array opened at ``text[start]``; brackets inside strings do not count."""
    scan = JsonScan(None)
    for pos in range(start, len(text)):
        char = text[pos]
        if scan.in_string:
            if scan.escaped:
                scan.escaped = False
            elif char == "\\":
                scan.escaped = True
            elif char == '"':
                scan.in_string = False
        elif char == '"':
            scan.in_string = True
        elif char in _CLOSERS:
            scan.awaited.append(_CLOSERS[char])
        elif char in "}]" and scan.awaited:
            scan.awaited.pop()
            if not scan.awaited:
                scan.end = pos + 1
                return scan
    return scan


def json_object_end(text: str, start: int) -> int | None:
    """The index just past the object or array opened at ``text[start]``, or None when the text ends
    before it closes."""
    return scan_json(text, start).end


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
