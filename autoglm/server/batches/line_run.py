"""One line run: its request sent as its tenant's, and the answer made its result, or a wait when the answer
asks the client to come back later (a rate limit, a quota spent for its window, a full queue, a server not
ready): such a line is never failed, it runs again."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus

from autoglm.server.batches.dispatch import LineDispatcher
from autoglm.server.batches.records import LineRequest
from autoglm.server.batches.results import LineResult, answered
from autoglm.server.openai.errors import APIError
from autoglm.server.tenants.keyring import Principal

RETRIED_STATUSES = (HTTPStatus.TOO_MANY_REQUESTS, HTTPStatus.SERVICE_UNAVAILABLE)
# The wait when such an answer names none.
DEFAULT_RETRY_S = 1.0


@dataclass(frozen=True)
class RetryLater:
    after_s: float


async def run_line(dispatcher: LineDispatcher, line: LineRequest, principal: Callable[[], Principal | None],
                   priority: int) -> LineResult | RetryLater:
    try:
        speaker = principal()
    except APIError as refusal:
        return answered(line.custom_id, refusal.status, None, refusal.body.model_dump())
    answer = await dispatcher.send(line.url, line.body, speaker, priority)
    if answer.status in RETRIED_STATUSES:
        return RetryLater(answer.retry_after_s if answer.retry_after_s is not None else DEFAULT_RETRY_S)
    return answered(line.custom_id, answer.status, answer.request_id, answer.body)
