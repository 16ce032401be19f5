"""The flow both generation endpoints share: run the request, answer whole or as a stream.

Each endpoint supplies a ResponseBuilder for its own JSON shapes; admission errors, timeouts,
disconnects, usage, the numbering of a batch of prompts' choices, and the per-request log line
are handled here once.
"""
from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from functools import partial
from http import HTTPStatus
from typing import Protocol

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from autoglm.engine.sequence import TenantTag
from autoglm.engine.tokenize import TokenizedPrompt
from autoglm.outputs import RequestOutput, add_delta
from autoglm.sampling_params import SamplingParams
from autoglm.server.batches.line_priority import scheduling_priority
from autoglm.server.dependencies import allowed_model
from autoglm.server.http.disconnect import ClientDisconnected, until_disconnected
from autoglm.server.http.request_ids import adopt_request_id
from autoglm.server.openai.errors import APIError, to_api_error
from autoglm.server.versions.served_version import ServedVersion
from autoglm.server.openai.protocol import GenerationRequest
from autoglm.engine.request_stream import IndexedOutput
from autoglm.server.response_cache.cache import CacheLookup
from autoglm.server.openai.responses import PromptTokensDetails, UsageInfo
from autoglm.server.state import ServerState
from autoglm.server.openai.streaming import ChoiceDelta, DeltaTracker, EventStreamResponse
from autoglm.server.tenants.access import request_principal
from autoglm.server.observability.tracking import CLIENT_CLOSED_REQUEST, RequestTracker, TokenCounts


class ResponseBuilder(Protocol):
    """An endpoint's answer shapes: the whole answer (each prompt's whole output, in prompt order, and the
    usage), and a stream's server-sent events: those that open it, those of one choice's delta, those that close
    it once every prompt has finished, and those that end it on an error (see ``ChunkStream`` for OpenAI's)."""

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> BaseModel: ...

    def opening_events(self) -> list[str]: ...

    def delta_events(self, delta: ChoiceDelta, output: RequestOutput) -> list[str]: ...

    def closing_events(self, usage: UsageInfo, include_usage: bool) -> list[str]: ...

    def error_events(self, error: APIError) -> list[str]: ...


def accept_generation(raw: Request, state: ServerState, body: GenerationRequest) -> None:
    """What both generation routes do first: the body's own ``request_id`` names the request in logs and
    answers, and its model becomes one the key may generate with."""
    adopt_request_id(raw, body.request_id)
    body.model = allowed_model(raw, state, body.model, generates=True)


def choice_index(prompt_index: int, choices_per_prompt: int, index: int) -> int:
    """OpenAI numbers the choices of a batch of prompts prompt by prompt, n to a prompt."""
    return prompt_index * choices_per_prompt + index


def usage_info(counts: TokenCounts) -> UsageInfo:
    """Tokens of every prompt and every completion generated, best_of candidates included."""
    return UsageInfo(
        prompt_tokens=counts.prompt,
        completion_tokens=counts.completion,
        total_tokens=counts.prompt + counts.completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=counts.cached),
    )


def response_cache_lookup(state: ServerState, raw: Request, body: GenerationRequest, params: SamplingParams,
                          served: ServedVersion, image_hashes: tuple[bytes, ...] = ()) -> CacheLookup | None:
    """The request's place in the response cache, keyed by the exact version routed to and the content of its
    images; None with the cache off."""
    cache = state.response_cache
    return cache.lookup(raw, body, params, served, tenant_tag(raw), image_hashes) if cache is not None else None


async def serve_generation(raw: Request, served: ServedVersion, tracker: RequestTracker,
                           prompts: list[TokenizedPrompt], params: SamplingParams, body: GenerationRequest,
                           builder: ResponseBuilder, cache: CacheLookup | None = None) -> Response:
    """Answer one generation request; a failure before the first byte is raised as an APIError.

    The prompts come tokenized (on the tokenizer workers), so the engine thread never tokenizes. `served` is
    the model version routed to (`served.version_id` is what the response names), already holding the request;
    an adapter's requests run with it on its base's engine.

    A stream starts once the first output is in, so an invalid or rejected request still gets a
    proper status code (the engine admits a batch of prompts together, so a refused one refuses
    all). A client gone before then is answered with nothing (logged as 499).

    With the response cache on (`cache`), a cached answer takes the engine's place, whole or streamed
    alike, and the answer says which it was in its x-autoglm-cache header.
    """
    generate = partial(served.engine.generate, tracker.request_id, prompts, params,
                       priority=scheduling_priority(raw, body.priority), arrival_time=tracker.arrival_time,
                       observe=tracker.observe, tenant=tenant_tag(raw), lora_request=served.lora)
    try:
        await served.prepare()
        outputs = await cache.outputs(generate, tracker) if cache is not None else generate()
    except Exception as error:
        raise _refusal(error, tracker) from error
    headers = cache.headers if cache is not None else None
    try:
        if not body.stream:
            finals = await until_disconnected(raw, _final_outputs(outputs, len(prompts)))
            tracker.finish(HTTPStatus.OK)
            response = builder.response(finals, usage_info(tracker.token_counts))
            return JSONResponse(response.model_dump(mode="json"), headers=headers)
        first = await until_disconnected(raw, anext(outputs))
    except ClientDisconnected:
        tracker.finish(CLIENT_CLOSED_REQUEST)
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except Exception as error:
        raise _refusal(error, tracker) from error
    return EventStreamResponse(_events(first, outputs, builder, tracker, body.include_usage, params.n), headers)


def _refusal(error: Exception, tracker: RequestTracker) -> APIError:
    """The answer to a request that failed before its first byte, with the request ended on it."""
    api_error = to_api_error(error, tracker.request_id)
    tracker.finish(api_error.status, api_error.body.error.message)
    return api_error


def tenant_tag(raw: Request) -> TenantTag | None:
    """Whom the engine serves the request for: the key's tenant, with its weight and cache salt; None without keys."""
    principal = request_principal(raw)
    if principal is None:
        return None
    tenant = principal.tenant
    return TenantTag(tenant.id, tenant.weight, tenant.cache_salt)


async def _final_outputs(outputs: AsyncIterator[IndexedOutput], num_prompts: int) -> list[RequestOutput]:
    finals: dict[int, RequestOutput] = {}
    async for index, delta in outputs:
        add_delta(finals, index, delta)
    assert len(finals) == num_prompts, "generate ends with every prompt finished or an error"
    return [finals[index] for index in range(num_prompts)]


async def _events(first: IndexedOutput, outputs: AsyncGenerator[IndexedOutput, None], builder: ResponseBuilder,
                  tracker: RequestTracker, include_usage: bool, num_choices: int) -> AsyncGenerator[str, None]:
    """Chunks as choices advance, numbered across the prompts; once every prompt has finished,
    usage if asked for. An error ends the stream as an error event.

    Closing this generator early (the client went away) closes `outputs`, which aborts the request.
    The builder frames every event (see ``ResponseBuilder``).
    """
    deltas: dict[int, DeltaTracker] = {}
    item: IndexedOutput | None = first
    status, error_message = CLIENT_CLOSED_REQUEST, None
    try:
        for event in builder.opening_events():
            yield event
        while item is not None:
            prompt_index, output = item
            for delta in deltas.setdefault(prompt_index, DeltaTracker(num_choices)).advance(output):
                numbered = replace(delta, index=choice_index(prompt_index, num_choices, delta.index))
                for event in builder.delta_events(numbered, output):
                    yield event
            item = await anext(outputs, None)
        closing = builder.closing_events(usage_info(tracker.token_counts), include_usage)
        status = HTTPStatus.OK
    except Exception as error:
        api_error = to_api_error(error, tracker.request_id)
        status, error_message = api_error.status, api_error.body.error.message
        closing = builder.error_events(api_error)
    finally:
        await outputs.aclose()
        tracker.finish(status, error_message)
    for event in closing:
        yield event
