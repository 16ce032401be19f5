"""GLM-4.5, GLM-4.6 and GLM-4.7: a call is <tool_call>NAME, then each argument as
<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>, then </tool_call>, with text allowed around calls.

A value is raw text, read as the type the tool's schema gives its key (argument_text.py). The
arguments are streamed as they are written: a call counts from the moment its name is complete, a
key goes out once its closing tag is read, and a string value character by character.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from autoglm.server.tool_calls.argument_text import argument_json, is_string_argument, json_string_prefix
from autoglm.server.tool_calls.parsed import (
    ParsedOutput,
    ReadCall,
    ToolCallText,
    held_back_length,
    next_call_start,
    skip_whitespace,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
KEY_OPEN, KEY_CLOSE = "<arg_key>", "</arg_key>"
VALUE_OPEN, VALUE_CLOSE = "<arg_value>", "</arg_value>"
MARKERS = (OPEN, CLOSE, KEY_OPEN, KEY_CLOSE, VALUE_OPEN, VALUE_CLOSE)


class Glm45ToolCallParser:
    """Only a declared tool's name opens a call: a block naming another stays content. Whitespace
    between tags is ignored, and so is other stray text inside a call."""

    # What may end a call's name. GLM-4.5 and GLM-4.6 write it on a line of its own, but GLM-4.5-Air
    # has been seen writing the first <arg_key> on the same line, after a space.
    NAME_ENDS: tuple[str, ...] = ("\n", KEY_OPEN)

    def __init__(self, tools: Mapping[str, dict[str, Any] | None]) -> None:
        self._tools = dict(tools)

    def parse(self, text: str, final: bool) -> ParsedOutput:
        parsed = ParsedOutput("")
        pos = 0
        while True:
            start = next_call_start(text, pos, OPEN, final, parsed)
            if start is None:
                return parsed
            name_start = skip_whitespace(text, start + len(OPEN))
            name_end = self._name_end(text, name_start)
            if name_end is None:
                name = text[name_start:].strip()
                if final and name in self._tools:  # cut off right after the name
                    parsed.calls.append(ToolCallText(name, ""))
                    return parsed
                if not final and self._may_be_named(text[name_start:]):
                    return parsed
            elif (name := text[name_start:name_end].strip()) in self._tools:
                call = _read_arguments(text, name_end, name, self._tools[name], final)
                parsed.calls.append(call.call)
                if call.end is None:
                    return parsed
                pos = call.end
                continue
            parsed.content += OPEN  # no call: the block is text
            pos = start + len(OPEN)

    def _name_end(self, text: str, name_start: int) -> int | None:
        """Where the name that starts at `name_start` ends; None while no end is written."""
        ends = [at for end in self.NAME_ENDS if (at := text.find(end, name_start)) >= 0]
        return min(ends, default=None)

    def _may_be_named(self, partial: str) -> bool:
        """Whether `partial`, a name not yet ended, may still be a declared tool's once more is written."""
        partial = partial[:len(partial) - max(held_back_length(partial, end) for end in self.NAME_ENDS)]
        written = partial.rstrip()
        return any(name.startswith(written) for name in self._tools)


class Glm47ToolCallParser(Glm45ToolCallParser):
    """GLM-4.7 writes the name straight before the first <arg_key>, and a call without arguments as
    <tool_call>NAME</tool_call>."""

    NAME_ENDS = ("\n", KEY_OPEN, CLOSE)


def _read_arguments(text: str, pos: int, name: str, schema: dict[str, Any] | None, final: bool) -> ReadCall:
    """The call to `name` whose arguments start at `pos`, as JSON text written in the order the keys come."""
    written = ""
    while True:
        key_at, close_at = text.find(KEY_OPEN, pos), text.find(CLOSE, pos)
        if close_at >= 0 and (key_at < 0 or close_at < key_at):
            return ReadCall(ToolCallText(name, (written or "{") + "}", complete=True), close_at + len(CLOSE))
        key_end = text.find(KEY_CLOSE, key_at) if key_at >= 0 else -1
        if key_end < 0:
            return ReadCall(ToolCallText(name, written), None)
        key = text[key_at + len(KEY_OPEN):key_end].strip()
        written += ("{" if not written else ", ") + json.dumps(key, ensure_ascii=False) + ": "
        is_string = is_string_argument(schema, key)
        value_at = skip_whitespace(text, key_end + len(KEY_CLOSE))
        if not text.startswith(VALUE_OPEN, value_at):
            if not final and VALUE_OPEN.startswith(text[value_at:]):
                return ReadCall(ToolCallText(name, written), None)
            written += argument_json("", is_string)  # a key without a value: an empty one
            pos = value_at
            continue
        value_start = value_at + len(VALUE_OPEN)
        value_end = text.find(VALUE_CLOSE, value_start)
        if value_end < 0:
            if is_string:  # streamed as written, short of what may be the start of the closing tag
                raw = text[value_start:]
                shown = raw if final else raw[:len(raw) - held_back_length(raw, VALUE_CLOSE)]
                written += '"' + json_string_prefix(shown)
            return ReadCall(ToolCallText(name, written), None)
        written += argument_json(text[value_start:value_end], is_string)
        pos = value_end + len(VALUE_CLOSE)
