"""The chat route's errors told in the Responses request's words: a field is named as this request names it
(max_output_tokens, not the max_completion_tokens it was translated into; input[2].content[0], not the
messages[3].content[0] that item became)."""
from __future__ import annotations

import re

from autoglm.server.openai.errors import APIError

# Each chat field a Responses field was translated into, longest first, so that a path is renamed whole.
RESPONSES_NAMES = {
    "response_format.json_schema": "text.format",
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
    "max_tokens": "max_output_tokens",
    "thinking_token_budget": "reasoning.effort",
    "chat_template_kwargs": "reasoning.effort",
}
_FIELD_NAMES = re.compile("|".join(rf"(?<![\w.]){re.escape(name)}(?!\w)" for name in RESPONSES_NAMES))
_MESSAGE_CONTENT = re.compile(r"messages\[(\d+)\]\.content(\[\d+\])?")
# Where a message the request did not give stands: a stored response's.
STORED_CONTENT = "previous_response_id"


def in_responses_terms(error: APIError, content_paths: dict[int, str]) -> APIError:
    """`error` with the chat fields of its param and message named as the Responses request names them;
    `content_paths` says where each chat message's content came from (see ChatTranslation)."""
    info = error.body.error
    if info.param is None:
        return error

    def renamed(text: str) -> str:
        text = _MESSAGE_CONTENT.sub(lambda match: _content_path(match, content_paths), text)
        return _FIELD_NAMES.sub(lambda match: RESPONSES_NAMES[match.group(0)], text)

    param = "input" if info.param == "messages" else renamed(info.param)
    return APIError(error.status, renamed(info.message), param=param, code=info.code, headers=error.headers,
                    error_type=info.type)


def _content_path(match: re.Match[str], content_paths: dict[int, str]) -> str:
    path = content_paths.get(int(match.group(1)))
    return STORED_CONTENT if path is None else path + (match.group(2) or "")
