"""Prompts longer than the tokenizer's own model_max_length are expected: no transformers warning for them."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

pytestmark = pytest.mark.timeout(60)

LONG_PROMPT = "Hello world, the quick brown fox. " * 60  # past the 256-token context of the test server
WARNING = "Token indices sequence length is longer than the specified maximum sequence length"


@contextmanager
def transformers_warnings() -> Iterator[list[str]]:
    """Messages transformers logs meanwhile (its loggers do not propagate to the root one)."""
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())
    library_logger = logging.getLogger("transformers")
    library_logger.addHandler(handler)
    try:
        yield messages
    finally:
        library_logger.removeHandler(handler)


def test_long_prompts_do_not_warn_about_the_tokenizers_length(server, monkeypatch):
    tokenizer = server.state.engine.engine.tokenizer
    for each in (tokenizer, *server.state.tokenizers.worker_tokenizers):
        monkeypatch.setattr(each, "model_max_length", 16)
        monkeypatch.setattr(each, "deprecation_warnings", {})  # transformers warns once per tokenizer
    with transformers_warnings() as messages:
        refused = httpx.post(server.url + "/v1/completions", json={"prompt": LONG_PROMPT, "max_tokens": 1})
        chat = httpx.post(server.url + "/v1/chat/completions",
                          json={"messages": [{"role": "user", "content": LONG_PROMPT}], "max_tokens": 1})
        counted = httpx.post(server.url + "/tokenize", json={"prompt": LONG_PROMPT})
        assert [refused.status_code, chat.status_code, counted.status_code] == [400, 400, 200]
        assert not [message for message in messages if WARNING in message]
        tokenizer.encode(LONG_PROMPT)  # the warning these calls avoid, caught where they would log it
    assert [message for message in messages if WARNING in message]
