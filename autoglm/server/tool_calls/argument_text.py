"""Arguments written as raw text, one value per key (GLM-4.5's <arg_value>), turned into JSON: a value
the tool's schema calls a string is the text as written; any other is the JSON it reads as, if any."""
from __future__ import annotations

import json
from typing import Any


def is_string_argument(schema: dict[str, Any] | None, key: str) -> bool:
    """Whether the schema gives `key` the type "string" alone: only then is its text the value as it is."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    declared = properties.get(key) if isinstance(properties, dict) else None
    return isinstance(declared, dict) and declared.get("type") == "string"


def json_string_prefix(raw: str) -> str:
    """`raw` JSON-escaped without its quotes: escaped character by character, so the escape of a
    prefix of some text is a prefix of the escape of the whole, and a stream never splits an escape."""
    return json.dumps(raw, ensure_ascii=False)[1:-1]


def argument_json(raw: str, is_string: bool) -> str:
    """The JSON text of a value written as `raw`: a string as it is, or the JSON `raw` reads as, and
    the text as a string where it reads as none (NaN and Infinity are no JSON)."""
    if not is_string:
        try:
            return json.dumps(json.loads(raw, parse_constant=_no_constant), ensure_ascii=False)
        except (ValueError, RecursionError):
            pass
    return json.dumps(raw, ensure_ascii=False)


def _no_constant(constant: str) -> Any:
    raise ValueError(f"{constant} is no JSON value")
