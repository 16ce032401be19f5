"""The lines of a batch's output and error files, as OpenAI writes them.

A request the endpoint answered (any status) is ``{"id", "custom_id", "response": {"status_code",
"request_id", "body"}, "error": null}``: a 2xx in the output file, the rest in the error file. A
request never answered (refused as read, cancelled, expired) is in the error file with ``"response":
null`` and ``"error": {"code", "message"}``, and the number of its line when it was refused as read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoglm.server.batches.ids import new_line_result_id

CANCELLED = ("batch_cancelled", "This request was not run: the batch was cancelled before it started.")
EXPIRED = ("batch_expired", "This request could not be executed before the completion window expired.")


@dataclass(frozen=True)
class TokenUsage:
    """What a line's request used, added to its batch's usage."""

    input: int = 0
    cached: int = 0
    output: int = 0


@dataclass(frozen=True)
class LineResult:
    """A line's entry in the output file (`succeeded`) or the error file, and what its request used."""

    entry: dict[str, Any]
    succeeded: bool
    usage: TokenUsage = TokenUsage()


def answered(custom_id: str, status: int, request_id: str | None, body: object) -> LineResult:
    succeeded = 200 <= status < 300
    entry = {"id": new_line_result_id(), "custom_id": custom_id,
             "response": {"status_code": status, "request_id": request_id, "body": body}, "error": None}
    return LineResult(entry, succeeded, usage_of(body) if succeeded else TokenUsage())


def not_run(custom_id: str | None, code: str, message: str, line_number: int | None = None) -> LineResult:
    error: dict[str, Any] = {"code": code, "message": message}
    if line_number is not None:
        error["line"] = line_number
    return LineResult({"id": new_line_result_id(), "custom_id": custom_id, "response": None, "error": error}, False)


def usage_of(body: object) -> TokenUsage:
    """The usage an answer reports, in OpenAI's chat and completions names (prompt_tokens, completion_tokens)
    or the Responses and Messages names (input_tokens, output_tokens)."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return TokenUsage()
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return TokenUsage(input=_count(usage.get("prompt_tokens", usage.get("input_tokens"))),
                      cached=_count(cached if cached is not None else usage.get("cache_read_input_tokens")),
                      output=_count(usage.get("completion_tokens", usage.get("output_tokens"))))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
