"""The tools the parsers' tests declare, the shape of a reply they read, and argument text that
tempts a parser to stop early."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TOOLS: dict[str, dict[str, Any] | None] = {
    "get_weather": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "detailed": {"type": "boolean"},
        "units": {"type": ["string", "null"]}}},
    "search": {"type": "object", "properties": {
        "query": {"type": "string"}, "filters": {"type": "object"}, "tags": {"type": "array"},
        "limit": {"type": "number"}}},
    "write_file": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
    "get_time": None,  # declared without parameters
}
# A string value with '<', prefixes of the closing tags, quotes, backslashes, newlines and non-ASCII.
CODE = 'if a < b and tag != "</arg":\n\tprint("C:\\\\temp\\\\北京", \'</arg_val\', "</tool")\n'
PATH = 'C:\\data\\Zürich "old".txt'
# An object value, nested, with strings that look like markup.
FILTERS = {"lang": "zh", "range": {"from": 1, "to": [2, 3]}, "note": 'a <b> "c"'}


@dataclass(frozen=True)
class Transcript:
    """A reply as a model writes it, and what reading it gives."""

    id: str
    text: str
    content: str  # as a client is shown it
    calls: list[tuple[str, dict[str, Any]]]  # each call's name and arguments, as JSON reads them
