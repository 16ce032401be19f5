"""What the engine hands back for each request, in the shape vLLM users know."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Logprob:
    """A token's log-probability under the model, and its rank among all tokens (1 = most likely)."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


# One entry per token position: the token actually there plus the top-N alternatives.
PositionLogprobs = dict[int, Logprob]


@dataclass
class RequestMetrics:
    """Wall-clock timestamps (time.time()) of a request's life."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None


@dataclass
class CompletionOutput:
    """One generated continuation (a request with n > 1 has n of them)."""

    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None = None
    logprobs: list[PositionLogprobs] | None = None
    finish_reason: str | None = None  # "stop", "length" or "abort"; None while running
    stop_reason: str | int | None = None  # the stop string or stop token that ended it

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """The state of one request after an engine step; ``finished`` once every completion ended."""

    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics
    prompt_logprobs: list[PositionLogprobs | None] | None = None
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    error: str | None = field(default=None)
