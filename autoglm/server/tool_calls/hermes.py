"""Qwen2.5 and Qwen3 (the Hermes format): each call a JSON object between <tool_call> and </tool_call>,
with text allowed around them."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoglm.server.tool_calls.json_scan import scan_json_call
from autoglm.server.tool_calls.parsed import ParsedOutput, next_call_start, skip_whitespace

OPEN, CLOSE = "<tool_call>", "</tool_call>"


class HermesToolCallParser:
    """A block whose body is not a call ({"name": ..., "arguments": {...}}) to a declared tool stays
    content. The arguments are the model's JSON text as written, so a string streams as it comes."""

    def __init__(self, tools: Mapping[str, dict[str, Any] | None]) -> None:
        self._names = frozenset(tools)

    def parse(self, text: str, final: bool) -> ParsedOutput:
        parsed = ParsedOutput("")
        pos = 0
        while True:
            start = next_call_start(text, pos, OPEN, final, parsed)
            if start is None:
                return parsed
            close = text.find(CLOSE, start)
            body = text if close < 0 else text[:close]
            scanned = scan_json_call(body, skip_whitespace(body, start + len(OPEN)))
            if scanned is not None and scanned.call.name not in self._names:
                scanned = None
            if scanned is None and close < 0 and not final:
                return parsed  # the block is still open: its body may yet become a call
            if close < 0:
                if scanned is None:
                    parsed.content += text[start:]
                else:
                    parsed.calls.append(scanned.call)
                return parsed
            if scanned is None:
                parsed.content += text[start:close + len(CLOSE)]
            else:
                parsed.calls.append(scanned.call)
            pos = close + len(CLOSE)
