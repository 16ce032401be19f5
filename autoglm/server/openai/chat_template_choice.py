"""Which chat template renders a request, and in which shape the template reads a message's content."""
from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any, Literal, Protocol

from autoglm.config.chat_template import template_syntax_error
from autoglm.config.server import ChatConfig
from autoglm.server.openai.chat_prompt import ChatRendering
from autoglm.server.openai.errors import APIError

class RenderedRequest(Protocol):
    """The fields of a request that say how its messages render (chat, tokenize and Anthropic's counting)."""

    chat_template: str | None
    add_generation_prompt: bool
    continue_final_message: bool
    chat_template_kwargs: dict[str, Any] | None


# A template that loops over a message's content reads it as a list of parts (OpenAI's shape).
_LOOP_OVER_CONTENT = re.compile(r"\{%-?\s*for\s+\w+\s+in\s+[\w.\[\]'\"]*content\b")


def request_chat_template(template: str | None, chat: ChatConfig) -> str | None:
    """The request's own chat_template, where the server trusts request templates; a 400 naming the field
    otherwise, or when it is not a valid Jinja template."""
    if template is None:
        return None
    if not chat.trust_request_chat_template:
        raise APIError(HTTPStatus.BAD_REQUEST, "this server renders only its own chat template "
                       "(trust_request_chat_template is off); leave chat_template out", param="chat_template",
                       code="invalid_value")
    error = template_syntax_error(template)
    if error is not None:
        raise APIError(HTTPStatus.BAD_REQUEST, f"chat_template is not a valid Jinja template: {error}",
                       param="chat_template", code="invalid_value")
    return template


def content_format(template: str | None, chat: ChatConfig) -> Literal["string", "openai"]:
    """The content_format setting, with 'auto' read off the template: parts where it loops over them."""
    if chat.chat_template_content_format != "auto":
        return chat.chat_template_content_format
    return "openai" if template and _LOOP_OVER_CONTENT.search(template) else "string"


def request_rendering(body: RenderedRequest, chat: ChatConfig, model_template: str | None,
                      find_reply_opening: bool = False) -> ChatRendering:
    """How a request's messages render: with its own template where the server allows it, else the model's
    (`model_template`), whose loops over content choose the shape of each message's content."""
    own_template = request_chat_template(body.chat_template, chat)
    return ChatRendering(body.add_generation_prompt, body.continue_final_message, body.chat_template_kwargs,
                         own_template, content_format(own_template or model_template, chat), find_reply_opening)
