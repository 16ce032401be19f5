"""What one request of ``autoglm bench serve`` measured, and the latencies derived from it.

Times are seconds after the start of the run, so every request of a run sits on one clock.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestResult:
    """What one request measured: seconds since the run started, and the server's usage counts."""

    prompt_len: int | None  # the benchmark tokenizer's count, None without one
    output_len: int  # max_tokens asked for
    send_time: float
    chunk_times: list[float] = field(default_factory=list)  # arrival of each chunk that carried a choice
    end_time: float | None = None  # the stream's [DONE]
    prompt_tokens: int | None = None  # from the server's usage, when it sends one
    completion_tokens: int | None = None
    error: str | None = None
    tenant: str | None = None  # who sent it, in a multi-tenant run
    served_by: list[str] = field(default_factory=list)  # each chunk's `model`, once each, in order of arrival

    @property
    def success(self) -> bool:
        return self.error is None and self.end_time is not None

    @property
    def output_tokens(self) -> int:
        """The server's count; without usage, one token per chunk."""
        return self.completion_tokens if self.completion_tokens is not None else len(self.chunk_times)

    @property
    def input_tokens(self) -> int | None:
        """The server's count, which includes any special tokens it adds; else the benchmark's."""
        return self.prompt_tokens if self.prompt_tokens is not None else self.prompt_len

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times[0] - self.send_time if self.chunk_times else None

    @property
    def e2el_s(self) -> float | None:
        return self.end_time - self.send_time if self.end_time is not None else None

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first; None with fewer than two tokens."""
        if self.ttft_s is None or self.e2el_s is None or self.output_tokens < 2:
            return None
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def itls_s(self) -> list[float]:
        """Gaps between consecutive chunks."""
        return [later - earlier for earlier, later in zip(self.chunk_times, self.chunk_times[1:])]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "success": self.success,
            "error": self.error,
            "prompt_len": self.prompt_len,
            "output_len": self.output_len,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "output_tokens": self.output_tokens,
            "send_time_s": self.send_time,
            "chunk_times_s": self.chunk_times,
            "end_time_s": self.end_time,
        }
