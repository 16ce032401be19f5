"""One streamed completion against an OpenAI-compatible server, timed chunk by chunk.

Times are ``time.perf_counter()`` seconds after a shared origin, the start of the run, so
every request of a run sits on one clock.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from autoglm.bench.lib.datasets import ServeRequest
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.request_result import RequestResult

# How much of an error body a message quotes.
ERROR_EXCERPT_CHARS = 300
MODELS_TIMEOUT_S = 30.0


def bearer_headers(api_key: str | None) -> dict[str, str]:
    """The header an OpenAI client sends with its key; none without a key."""
    return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}


class StreamError(Exception):
    """The server answered, but not with a complete stream of completion chunks."""


@dataclass(frozen=True)
class CompletionTarget:
    """Where every request goes, as whom, and what its body asks for besides the prompt."""

    base_url: str
    model: str
    ignore_eos: bool = True
    timeout_s: float | None = None
    api_key: str | None = None  # sent as 'Authorization: Bearer KEY'
    tenant: str | None = None  # the name results are grouped by in a multi-tenant run

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/v1/completions"

    @property
    def headers(self) -> dict[str, str]:
        return bearer_headers(self.api_key)

    def body(self, request: ServeRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": request.prompt,
            "max_tokens": request.output_len,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.ignore_eos:
            body["ignore_eos"] = True
        return body


async def send_request(http: httpx.AsyncClient, target: CompletionTarget, request: ServeRequest,
                       origin: float) -> RequestResult:
    """Send one request now; a failure of any kind is recorded in the result, never raised."""
    result = RequestResult(request.prompt_len, request.output_len, send_time=time.perf_counter() - origin,
                           tenant=target.tenant)
    try:
        await asyncio.wait_for(_read_stream(http, target, request, origin, result), target.timeout_s)
    except asyncio.TimeoutError:
        result.error = f"no complete answer within {target.timeout_s} s"
    except httpx.HTTPError as error:
        result.error = f"{type(error).__name__}: {error}"
    except StreamError as error:
        result.error = str(error)
    return result


async def _read_stream(http: httpx.AsyncClient, target: CompletionTarget, request: ServeRequest, origin: float,
                       result: RequestResult) -> None:
    async with http.stream("POST", target.url, json=target.body(request), headers=target.headers) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode(errors="replace")
            raise StreamError(f"HTTP {response.status_code}: {body[:ERROR_EXCERPT_CHARS]}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            now = time.perf_counter() - origin
            data = line.removeprefix("data:").strip()
            if data == "[DONE]":
                result.end_time = now
                return
            _record_chunk(_parse_chunk(data), now, result)
    raise StreamError("the stream ended without [DONE]")


def _parse_chunk(data: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError:
        raise StreamError(f"the server sent an event that is not JSON: {data[:ERROR_EXCERPT_CHARS]}") from None
    if not isinstance(chunk, dict):
        raise StreamError(f"the server sent an event that is not a JSON object: {data[:ERROR_EXCERPT_CHARS]}")
    if "error" in chunk or chunk.get("object") == "error":
        raise StreamError(f"error event: {data[:ERROR_EXCERPT_CHARS]}")
    return chunk


def _record_chunk(chunk: dict[str, Any], now: float, result: RequestResult) -> None:
    # Every chunk with a choice counts, empty text included (as vLLM's benchmark counts them):
    # servers send one per step that produced tokens, and text may lag behind its tokens.
    if chunk.get("choices"):
        result.chunk_times.append(now)
    model = chunk.get("model")
    if isinstance(model, str) and model not in result.served_by:
        result.served_by.append(model)  # a server that swaps versions names the one that serves each chunk
    usage = chunk.get("usage")
    if usage:
        result.prompt_tokens = usage.get("prompt_tokens")
        result.completion_tokens = usage.get("completion_tokens")


def fetch_models(base_url: str, api_key: str | None = None) -> list[dict[str, Any]]:
    """The server's model cards from GET /v1/models (``id``, and where vLLM or autoglm serve, ``root``)."""
    url = base_url.rstrip("/") + "/v1/models"
    try:
        response = httpx.get(url, timeout=MODELS_TIMEOUT_S, headers=bearer_headers(api_key))
        response.raise_for_status()
        cards = response.json()["data"]
    except httpx.HTTPError as error:
        raise ServeBenchError(f"could not list the served models at {url} ({type(error).__name__}: {error}); "
                              "is the server up? --model skips this look-up") from None
    except (ValueError, KeyError, TypeError):
        raise ServeBenchError(f"{url} did not answer with an OpenAI model list") from None
    if not cards:
        raise ServeBenchError(f"{url} lists no models")
    return cards
