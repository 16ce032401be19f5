"""A conversation's items as they are kept: each with an id of OpenAI's kind and a status, so that a stored
response lists its input as OpenAI does and a later turn can send any of them back."""
from __future__ import annotations

import uuid
from typing import Any

from pydantic import TypeAdapter

from autoglm.server.responses_api.protocol import InputItem

# OpenAI's id prefix for each kind of item.
ID_PREFIXES = {"message": "msg", "function_call": "fc", "function_call_output": "fco", "reasoning": "rs"}
_ITEMS = TypeAdapter(list[InputItem])


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def with_ids(items: list[InputItem]) -> list[InputItem]:
    """`items` with an id and a status each, as sent where they had them."""
    return [item.model_copy(update={"id": item.id or new_id(ID_PREFIXES[item.type]),
                                    "status": item.status or "completed"})
            for item in items]


def dump_items(items: list[InputItem]) -> list[dict[str, Any]]:
    """The items as JSON values, in the request's own field names."""
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]


def read_items(values: list[dict[str, Any]]) -> list[InputItem]:
    """Items kept as `dump_items` wrote them, or a response's output items, read back as input."""
    return _ITEMS.validate_python(values)
