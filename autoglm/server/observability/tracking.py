"""What the server records about each request: latency metrics as it runs, one log line when it ends."""
from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus

from pydantic_core import to_jsonable_python

from autoglm.outputs import RequestOutput
from autoglm.server.openai.errors import to_api_error
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.response_cache.outcome import CacheOutcome
from autoglm.server.tenants.usage import Usage, UsageLedger

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


@dataclass(frozen=True)
class RequestOutcome:
    """How a request ended, for the model version that took it in (its metrics, automatic rollback)."""

    status: int
    time_to_first_token_s: float | None
    prompt_tokens: int
    completion_tokens: int

    @property
    def failed(self) -> bool:
        """The server failed it (5xx); a refused input or a client that left is no fault of the version."""
        return self.status >= HTTPStatus.INTERNAL_SERVER_ERROR


@dataclass
class RequestTracker:
    """One HTTP request, which may hold several engine requests (a batch of prompts): its counts sum theirs.

    Token latencies are timed as each step's delta reaches the server (however late the client reads it): the
    engine's own timestamps live in one object it keeps updating, so they may already be a step ahead.

    A request of a tenant the engine took in is counted in its usage as it runs (so a crash loses at most a
    flush interval of it) and in its per-tenant metrics once it ends. `prompt`, set only when prompts may be
    logged, is written in the log line.
    """

    request_id: str
    metrics: ServerMetrics
    tenant: str | None = None
    usage: UsageLedger | None = None
    prompt: object | None = None
    client_request_id: str | None = None  # the x-request-id its answer carries (the client's, or made up)
    arrival_time: float = field(default_factory=time.time)
    finish_reason: str | None = None  # of the first choice, in the prompt whose first choice reported last
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    on_tokens: Callable[[int], None] | None = None  # told each step's new completion tokens (rate limits)
    cache: CacheOutcome | None = None  # what the response cache did for it; None with the cache off
    model: str | None = None  # the served version id, once routed
    on_end: Callable[[RequestOutcome], None] | None = None
    _counts: dict[str, TokenCounts] = field(default_factory=dict, init=False)  # by engine request id
    _last_token_time: float | None = field(default=None, init=False)
    _ended: bool = field(default=False, init=False)

    @property
    def token_counts(self) -> TokenCounts:
        """Summed over the request's prompts."""
        counts = self._counts.values()
        return TokenCounts(prompt=sum(c.prompt for c in counts), cached=sum(c.cached for c in counts),
                           completion=sum(c.completion for c in counts))

    def observe(self, delta: RequestOutput) -> None:
        """Take in one engine delta: token counts, first-token and inter-token latency."""
        new_tokens = self.count(delta)
        if self.first_scheduled_time is None:
            self.first_scheduled_time = delta.metrics.first_scheduled_time
        if not new_tokens:
            return
        now = time.time()
        if self._last_token_time is None:
            self.first_token_time = now
            self.metrics.time_to_first_token.observe(now - self.arrival_time)
        else:
            self.metrics.inter_token_latency.observe(now - self._last_token_time)
        self._last_token_time = now

    def count(self, delta: RequestOutput) -> int:
        """Take in a delta's token counts and finish reason, telling on_tokens of its new completion
        tokens (their number is returned). A replayed cached answer is counted this way alone: its
        latencies are not the engine's."""
        new_tokens = sum(len(completion.token_ids) for completion in delta.outputs)
        before = self._counts.get(delta.request_id)
        if self.usage is not None and self.tenant is not None and (before is None or new_tokens):
            self.usage.record(self.tenant, self._usage_added(delta, before is None, new_tokens))
        self._counts[delta.request_id] = TokenCounts(
            prompt=len(delta.prompt_token_ids),
            cached=delta.num_cached_tokens,
            completion=new_tokens + (before.completion if before is not None else 0),
        )
        first_choice = next((c for c in delta.outputs if c.index == 0), None)
        if first_choice is not None:
            self.finish_reason = first_choice.finish_reason
        if new_tokens and self.on_tokens is not None:
            self.on_tokens(new_tokens)
        return new_tokens

    @contextlib.contextmanager
    def logging_rejection(self) -> Iterator[None]:
        """Log the request if it is refused before it reaches the engine (bad input, unknown model, not ready),
        and answer any failure there as an APIError naming it."""
        try:
            yield
        except Exception as error:
            api_error = to_api_error(error, self.request_id)
            self.finish(api_error.status, api_error.body.error.message)
            if api_error is error:
                raise
            raise api_error from error

    def served_by(self, version_id: str, on_end: Callable[[RequestOutcome], None]) -> None:
        """The request was routed to the version `version_id`, which `on_end` tells how it ended."""
        self.model = version_id
        self.on_end = on_end

    def finish(self, status: int, error: str | None = None) -> None:
        """Write the request's log line (with the error message of a failed one) and, if it succeeded,
        its end-to-end metrics; tell the version that served it. Idempotent."""
        if self._ended:
            return
        self._ended = True
        now = time.time()
        scheduled, counts = self.first_scheduled_time, self.token_counts
        if status == HTTPStatus.OK and self.finish_reason is not None:
            self.metrics.count_success(self.finish_reason)
            # A replayed cached answer never reached the engine: its latency would only flatter the engine's.
            if self.cache is not CacheOutcome.HIT:
                self.metrics.e2e_request_latency.observe(now - self.arrival_time)
                if scheduled is not None:
                    self.metrics.request_queue_time.observe(scheduled - self.arrival_time)
        if self.tenant is not None and counts.prompt:
            self.metrics.count_tenant_request(self.tenant, self.finish_reason if status == HTTPStatus.OK else None,
                                              counts.prompt, counts.cached, counts.completion)
        line = {
            "request_id": self.request_id,
            "x_request_id": self.client_request_id,
            "tenant": self.tenant,
            "model": self.model or self.metrics.model_name,
            "status": status,
            "prompt_tokens": counts.prompt,
            "cached_tokens": counts.cached,
            "completion_tokens": counts.completion,
            "queue_ms": _ms(self.arrival_time, scheduled),
            "ttft_ms": _ms(self.arrival_time, self.first_token_time),
            "e2e_ms": _ms(self.arrival_time, now),
            "finish_reason": self.finish_reason,
            "cache": self.cache.value if self.cache is not None else None,
            "error": error,
        }
        if self.prompt is not None:
            line["prompt"] = to_jsonable_python(self.prompt, exclude_none=True)
        request_logger.info(json.dumps(line))
        if self.on_end is not None:
            self.on_end(RequestOutcome(status, None if self.first_token_time is None
                                       else self.first_token_time - self.arrival_time, counts.prompt,
                                       counts.completion))

    def _usage_added(self, delta: RequestOutput, first_of_prompt: bool, new_tokens: int) -> Usage:
        """What a delta adds to the tenant's usage: its completion tokens, and with a prompt's first delta
        that prompt's tokens (with the request's first delta, the request itself)."""
        if not first_of_prompt:
            return Usage(completion_tokens=new_tokens)
        first_of_request = not self._counts
        return Usage(requests=int(first_of_request), prompt_tokens=len(delta.prompt_token_ids),
                     cached_tokens=delta.num_cached_tokens, completion_tokens=new_tokens,
                     cached_requests=int(first_of_request and self.cache is CacheOutcome.HIT))
