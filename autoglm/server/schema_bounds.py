"""What the OpenAPI document says of a request field beyond its type, where the server checks the rest in code
(with messages of its own): so a schema fuzzer's valid request is one the server accepts."""
from __future__ import annotations

from typing import Any

# A list of one or more non-empty strings (guided_choice).
NON_EMPTY_STRINGS: dict[str, Any] = {"minItems": 1, "items": {"type": "string", "minLength": 1}}
