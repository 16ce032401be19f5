"""What the server records about each request: latency metrics as it runs, one log line when it ends."""
from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus

from autoglm.outputs import RequestOutput
from autoglm.server.errors import APIError
from autoglm.server.metrics import ServerMetrics

# One JSON object per line, one line per request, for log shippers to parse.
request_logger = logging.getLogger("autoglm.requests")

# The status logged for a client that went away before its answer (nginx's convention).
CLIENT_CLOSED_REQUEST = 499


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start) * 1000, 3)


@dataclass
class TokenCounts:
    prompt: int
    cached: int
    completion: int


@dataclass
class RequestTracker:
    """One HTTP request, which may hold several engine requests (a batch of prompts): its counts sum theirs.

    Token latencies are timed as outputs reach the server, once per step that added tokens: the
    engine's own timestamps live in one object it keeps updating, so they may already be a step ahead.
    """

    request_id: str
    metrics: ServerMetrics
    arrival_time: float = field(default_factory=time.time)
    finish_reason: str | None = None  # of the first choice of the prompt that reported last
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    _counts: dict[str, TokenCounts] = field(default_factory=dict, init=False)  # by engine request id
    _last_token_time: float | None = field(default=None, init=False)
    _ended: bool = field(default=False, init=False)

    @property
    def prompt_tokens(self) -> int:
        return sum(counts.prompt for counts in self._counts.values())

    @property
    def cached_tokens(self) -> int:
        return sum(counts.cached for counts in self._counts.values())

    @property
    def completion_tokens(self) -> int:
        return sum(counts.completion for counts in self._counts.values())

    def observe(self, output: RequestOutput) -> None:
        """Take in one engine output: token counts, first-token and inter-token latency."""
        completion_tokens_before = self.completion_tokens
        self._counts[output.request_id] = TokenCounts(
            prompt=len(output.prompt_token_ids),
            cached=output.num_cached_tokens,
            completion=sum(len(completion.token_ids) for completion in output.outputs),
        )
        self.finish_reason = output.outputs[0].finish_reason
        if self.first_scheduled_time is None:
            self.first_scheduled_time = output.metrics.first_scheduled_time
        if self.completion_tokens == completion_tokens_before:
            return
        now = time.time()
        if self._last_token_time is None:
            self.first_token_time = now
            self.metrics.time_to_first_token.observe(now - self.arrival_time)
        else:
            self.metrics.inter_token_latency.observe(now - self._last_token_time)
        self._last_token_time = now

    @contextlib.contextmanager
    def logging_rejection(self) -> Iterator[None]:
        """Log the request if it is refused before it reaches the engine (bad input, unknown model, not ready)."""
        try:
            yield
        except APIError as error:
            self.finish(error.status, error.body.error.message)
            raise

    def finish(self, status: int, error: str | None = None) -> None:
        """Write the request's log line (with the error message of a failed one) and, if it succeeded,
        its end-to-end metrics. Idempotent."""
        if self._ended:
            return
        self._ended = True
        now = time.time()
        scheduled = self.first_scheduled_time
        if status == HTTPStatus.OK and self.finish_reason is not None:
            self.metrics.count_success(self.finish_reason)
            self.metrics.e2e_request_latency.observe(now - self.arrival_time)
            if scheduled is not None:
                self.metrics.request_queue_time.observe(scheduled - self.arrival_time)
        request_logger.info(json.dumps({
            "request_id": self.request_id,
            "model": self.metrics.model_name,
            "status": status,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            "queue_ms": _ms(self.arrival_time, scheduled),
            "ttft_ms": _ms(self.arrival_time, self.first_token_time),
            "e2e_ms": _ms(self.arrival_time, now),
            "finish_reason": self.finish_reason,
            "error": error,
        }))
