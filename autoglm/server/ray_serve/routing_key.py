"""What cache-aware routing hashes: the leading characters of a generation request's prompt.

The HTTP side has no tokens, so a prompt's text stands for them: two requests whose prompts share
their first N characters share their first tokens too, whatever the tokenizer. A chat is rendered
to one text, message after message, so that chats sharing their first messages share a prefix.
"""
from __future__ import annotations

import json
from typing import Any

# The routes whose requests carry a prompt the engine will prefill.
PROMPT_ROUTES = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/messages", "/v1/responses"})


def routing_key(path: str, body: bytes, num_chars: int) -> str | None:
    """The first `num_chars` characters of the prompt of a request to `path`; None for other routes and for
    a body that is not a request the server would take (the replica answers that one with its error)."""
    if path not in PROMPT_ROUTES:
        return None
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(request, dict):
        return None
    text = _request_text(path, request)
    return text[:num_chars] if text else None


def _request_text(path: str, request: dict[str, Any]) -> str:
    """The prompt's text in the order the chat template renders it: Anthropic's system prompt and the Responses
    API's instructions come before the conversation."""
    if path == "/v1/messages":
        return _content_text(request.get("system")) + _chat_text(request.get("messages"))
    if path == "/v1/responses":
        conversation = request.get("input")
        turns = conversation if isinstance(conversation, str) else _chat_text(conversation)
        return _content_text(request.get("instructions")) + turns
    if "messages" in request:
        return _chat_text(request.get("messages"))
    return _prompt_text(request.get("prompt"))


def _prompt_text(prompt: Any) -> str:
    """A completion's prompt: its text, or its token ids written out; the first of a batch of prompts."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return " ".join(str(token) for token in prompt)
    return ""


def _chat_text(messages: Any) -> str:
    """Each message's role and text in order, as far as they read as messages."""
    if not isinstance(messages, list):
        return ""
    parts = []
    for message in messages:
        if not isinstance(message, dict):
            break
        parts.append(f"{message.get('role')}\n{_content_text(message.get('content'))}\n")
    return "".join(parts)


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text of its text parts (or blocks)."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""
