"""The Files and Batch APIs as the benchmark uses them: upload a JSONL file of chat lines, make a batch of it,
and watch its status until it ends."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from autoglm.bench.batch.chat_target import CHAT_PATH, chat_body
from autoglm.bench.lib.client import ERROR_EXCERPT_CHARS
from autoglm.bench.lib.datasets import ServeRequest
from autoglm.bench.lib.errors import ServeBenchError

# How often the status is read: often enough to date the batch's end well, seldom enough to cost nothing.
POLL_INTERVAL_S = 0.25
ENDED_STATUSES = ("completed", "failed", "expired", "cancelled")
# Distinct messages of the error file a results file quotes.
QUOTED_ERRORS = 3


def batch_lines(model: str, requests: Sequence[ServeRequest]) -> bytes:
    """One chat line per request, ``custom_id`` ``line-N``, as the Batch API's input file holds them."""
    lines = [json.dumps({"custom_id": f"line-{index}", "method": "POST", "url": CHAT_PATH,
                         "body": chat_body(model, request)}) for index, request in enumerate(requests)]
    return ("\n".join(lines) + "\n").encode()


def _answer(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code != 200:
        raise ServeBenchError(f"{what} was answered HTTP {response.status_code}: "
                              f"{response.text[:ERROR_EXCERPT_CHARS]}")
    return response.json()


async def upload_batch_file(http: httpx.AsyncClient, base_url: str, content: bytes) -> str:
    """The new file's id."""
    response = await http.post(base_url + "/v1/files", data={"purpose": "batch"},
                               files={"file": ("bench-batch.jsonl", content, "application/jsonl")})
    return _answer(response, "uploading the batch's input file")["id"]


async def create_batch(http: httpx.AsyncClient, base_url: str, file_id: str) -> str:
    """The new batch's id."""
    response = await http.post(base_url + "/v1/batches", json={
        "input_file_id": file_id, "endpoint": CHAT_PATH, "completion_window": "24h"})
    return _answer(response, "creating the batch")["id"]


async def error_messages(http: httpx.AsyncClient, base_url: str, file_id: str | None) -> list[str]:
    """The distinct messages of a batch's error file, the first few; none without one."""
    if file_id is None:
        return []
    text = (await http.get(f"{base_url}/v1/files/{file_id}/content")).text
    messages: list[str] = []
    for line in text.splitlines():
        record = json.loads(line)
        error = record.get("error") or ((record.get("response") or {}).get("body") or {}).get("error") or {}
        message = str(error.get("message", error))[:ERROR_EXCERPT_CHARS]
        if message not in messages:
            messages.append(message)
    return messages[:QUOTED_ERRORS]


@dataclass
class BatchWatch:
    """One batch's status as read every :data:`POLL_INTERVAL_S`: when it was first seen running and ended.

    Times are ``time.perf_counter()`` seconds after the run's origin, as the requests' are.
    """

    origin: float
    created_s: float
    running: asyncio.Event = field(default_factory=asyncio.Event)
    running_s: float | None = None
    ended_s: float | None = None
    last: dict[str, Any] = field(default_factory=dict)

    async def follow(self, http: httpx.AsyncClient, base_url: str, batch_id: str, timeout_s: float) -> None:
        """Read the status until the batch ends; ``running`` is set once it runs lines (or has ended)."""
        deadline = self.created_s + timeout_s
        try:
            while True:
                self.last = _answer(await http.get(f"{base_url}/v1/batches/{batch_id}"), "reading the batch")
                now = time.perf_counter() - self.origin
                if self.last["status"] == "in_progress" and self.running_s is None:
                    self.running_s = now
                    self.running.set()
                if self.last["status"] in ENDED_STATUSES:
                    self.ended_s = now
                    return
                if now > deadline:
                    raise ServeBenchError(f"batch {batch_id} had not ended {timeout_s:g} s after it was made "
                                          f"(status {self.last['status']}, {self.last.get('request_counts')}); "
                                          "allow more with --batch-timeout-s")
                await asyncio.sleep(POLL_INTERVAL_S)
        finally:
            self.running.set()  # whoever waits for it running goes on, to find it ended or failed

    @property
    def duration_s(self) -> float:
        """From the batch's creation to the first status that said it ended."""
        if self.ended_s is None:
            raise ServeBenchError("the batch has not ended")
        return self.ended_s - self.created_s
