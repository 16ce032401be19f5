"""A page of a stored response's input items, in OpenAI's list shape and cursor: ``after`` an item's id."""
from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError
from autoglm.server.responses_api.objects import InputItemList


def input_item_page(items: list[dict[str, Any]], limit: int, order: Literal["asc", "desc"],
                    after: str | None) -> InputItemList:
    """Up to `limit` of `items` (kept oldest first) in `order`, starting after the item whose id is `after`."""
    ordered = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [item["id"] for item in ordered]
        if after not in ids:
            raise APIError(HTTPStatus.BAD_REQUEST, f"after is {quote_value(after)}, the id of none of this "
                           f"response's input items", param="after", code="invalid_value")
        ordered = ordered[ids.index(after) + 1:]
    page = ordered[:limit]
    return InputItemList(data=page, first_id=page[0]["id"] if page else None,
                         last_id=page[-1]["id"] if page else None, has_more=len(ordered) > limit)
