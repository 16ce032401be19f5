"""Batch input files for the tests, and reading a batch's end through the openai SDK."""
from __future__ import annotations

import json

from openai import OpenAI
from openai.types import Batch, FileObject

from tests.server.live_server import wait_until

ENDED = ("completed", "failed", "expired", "cancelled")
# A hang guard only: a batch of the tests' size ends within seconds.
BATCH_TIMEOUT_S = 120.0


def chat_line(custom_id: str, **body: object) -> dict[str, object]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0, **body}}


def completion_line(custom_id: str, **body: object) -> dict[str, object]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/completions",
            "body": {"prompt": "Hello", "max_tokens": 2, "temperature": 0, **body}}


def jsonl(lines: list[dict[str, object] | str]) -> bytes:
    """One line each: a request as JSON, or a string as it is (for lines that are not JSON)."""
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


def upload(client: OpenAI, lines: list[dict[str, object] | str]) -> FileObject:
    return client.files.create(file=("requests.jsonl", jsonl(lines)), purpose="batch")


def submit(client: OpenAI, lines: list[dict[str, object] | str]) -> Batch:
    return client.batches.create(input_file_id=upload(client, lines).id, endpoint="/v1/chat/completions",
                                 completion_window="24h")


def wait_for_end(client: OpenAI, batch_id: str) -> Batch:
    ended: list[Batch] = []

    def has_ended() -> bool:
        batch = client.batches.retrieve(batch_id)
        ended[:] = [batch] if batch.status in ENDED else []
        return bool(ended)

    assert wait_until(has_ended, BATCH_TIMEOUT_S), f"batch {batch_id} did not end"
    return ended[0]


def file_lines(client: OpenAI, file_id: str | None) -> list[dict[str, object]]:
    """A batch's output or error file, line by line; none when the batch has no such file."""
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]
