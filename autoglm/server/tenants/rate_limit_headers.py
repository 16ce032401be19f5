"""What a tenant's budget looks like to its client: OpenAI's x-ratelimit-* headers and Retry-After."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WindowState:
    """One rate-limit window of a tenant as it stands now."""

    limit: int
    remaining: int
    reset_s: float  # seconds until the window gives budget back


@dataclass(frozen=True)
class RateLimitSnapshot:
    """The windows OpenAI reports in headers; None for a limit the tenant does not have."""

    requests: WindowState | None
    tokens: WindowState | None


def openai_duration(seconds: float) -> str:
    """A wait as OpenAI writes it in x-ratelimit-reset-*: '20ms' under a second, else '1s', '6m0s', '1h0m0s',
    rounded up so a client that waits that long finds the budget back."""
    if seconds <= 0:
        return "0s"
    milliseconds = math.ceil(seconds * 1000)
    if milliseconds < 1000:
        return f"{milliseconds}ms"
    hours, rest = divmod(math.ceil(seconds), 3600)
    minutes, whole_seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{whole_seconds}s"
    if minutes:
        return f"{minutes}m{whole_seconds}s"
    return f"{whole_seconds}s"


def retry_after(seconds: float) -> str:
    """Retry-After in whole seconds, at least 1: an integer is all the header allows."""
    return str(max(1, math.ceil(seconds)))


def rate_limit_headers(snapshot: RateLimitSnapshot) -> dict[str, str]:
    """x-ratelimit-{limit,remaining,reset}-{requests,tokens} for the windows the tenant has."""
    headers = {}
    for kind, window in (("requests", snapshot.requests), ("tokens", snapshot.tokens)):
        if window is not None:
            headers[f"x-ratelimit-limit-{kind}"] = str(window.limit)
            headers[f"x-ratelimit-remaining-{kind}"] = str(window.remaining)
            headers[f"x-ratelimit-reset-{kind}"] = openai_duration(window.reset_s)
    return headers
