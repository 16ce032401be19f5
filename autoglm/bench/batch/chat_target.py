"""Chat requests, the kind both an interactive user and a batch line send: one user message, greedy, every
token asked for generated."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoglm.bench.lib.client import CompletionTarget
from autoglm.bench.lib.datasets import ServeRequest

CHAT_PATH = "/v1/chat/completions"


def chat_body(model: str, request: ServeRequest) -> dict[str, Any]:
    """The request's prompt as one user message; ``ignore_eos`` so that every answer is as long as asked."""
    return {"model": model, "messages": [{"role": "user", "content": request.prompt}],
            "max_tokens": request.output_len, "temperature": 0.0, "ignore_eos": True}


@dataclass(frozen=True)
class ChatTarget(CompletionTarget):
    """A streamed ``/v1/chat/completions`` request, timed chunk by chunk as a completion is."""

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + CHAT_PATH

    def body(self, request: ServeRequest) -> dict[str, Any]:
        return {**chat_body(self.model, request), "stream": True, "stream_options": {"include_usage": True}}
