"""The flow both generation endpoints share: run the request, answer whole or as a stream.

Each endpoint supplies a ResponseBuilder for its own JSON shapes; admission errors, timeouts,
disconnects, usage, and the per-request log line are handled here once.
"""
from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from http import HTTPStatus
from typing import Protocol

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from autoglm.engine.llm_engine import Prompt
from autoglm.outputs import RequestOutput
from autoglm.sampling_params import SamplingParams
from autoglm.server.async_engine import AsyncEngine
from autoglm.server.disconnect import ClientDisconnected, until_disconnected
from autoglm.server.errors import to_api_error
from autoglm.server.protocol import GenerationRequest
from autoglm.server.responses import PromptTokensDetails, UsageInfo
from autoglm.server.streaming import DONE_EVENT, ChoiceDelta, DeltaTracker, EventStreamResponse, sse_event
from autoglm.server.tracking import CLIENT_CLOSED_REQUEST, RequestTracker


class ResponseBuilder(Protocol):
    """An endpoint's JSON shapes for a whole answer, one choice's chunk, and the closing usage chunk."""

    def response(self, output: RequestOutput) -> BaseModel: ...

    def chunk(self, delta: ChoiceDelta, output: RequestOutput) -> BaseModel: ...

    def usage_chunk(self, usage: UsageInfo) -> BaseModel: ...


def usage_info(output: RequestOutput) -> UsageInfo:
    prompt_tokens = len(output.prompt_token_ids)
    completion_tokens = sum(len(completion.token_ids) for completion in output.outputs)
    return UsageInfo(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=output.num_cached_tokens),
    )


async def serve_generation(raw: Request, engine: AsyncEngine, tracker: RequestTracker, prompt: Prompt,
                           params: SamplingParams, body: GenerationRequest, builder: ResponseBuilder) -> Response:
    """Answer one generation request; a failure before the first byte is raised as an APIError.

    A stream starts once the first output is in, so an invalid or rejected request still gets a
    proper status code. A client gone before then is answered with nothing (logged as 499).
    """
    outputs = engine.generate(tracker.request_id, prompt, params, priority=body.priority,
                              arrival_time=tracker.arrival_time)
    try:
        if not body.stream:
            final = await until_disconnected(raw, _final_output(outputs, tracker))
            tracker.finish(HTTPStatus.OK)
            return JSONResponse(builder.response(final).model_dump(mode="json"))
        first = await until_disconnected(raw, anext(outputs))
    except ClientDisconnected:
        tracker.finish(CLIENT_CLOSED_REQUEST)
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    except Exception as error:
        api_error = to_api_error(error)
        tracker.finish(api_error.status)
        raise api_error from error
    return EventStreamResponse(_events(first, outputs, builder, tracker, body.include_usage))


async def _final_output(outputs: AsyncIterator[RequestOutput], tracker: RequestTracker) -> RequestOutput:
    final = None
    async for final in outputs:
        tracker.observe(final)
    assert final is not None, "generate ends with a finished output or an error"
    return final


async def _events(first: RequestOutput, outputs: AsyncGenerator[RequestOutput, None], builder: ResponseBuilder,
                  tracker: RequestTracker, include_usage: bool) -> AsyncGenerator[str, None]:
    """Chunks as choices advance, then usage if asked for; an error ends the stream as an error event.

    Closing this generator early (the client went away) closes `outputs`, which aborts the request.
    """
    deltas = DeltaTracker(len(first.outputs))
    output: RequestOutput | None = first
    status = CLIENT_CLOSED_REQUEST
    try:
        while output is not None:
            tracker.observe(output)
            for delta in deltas.advance(output):
                yield sse_event(builder.chunk(delta, output).model_dump_json())
            if output.finished:
                if include_usage:
                    yield sse_event(builder.usage_chunk(usage_info(output)).model_dump_json())
                status = HTTPStatus.OK
            output = await anext(outputs, None)
    except Exception as error:
        api_error = to_api_error(error)
        status = api_error.status
        yield sse_event(api_error.body.model_dump_json())
    finally:
        await outputs.aclose()
        tracker.finish(status)
    yield DONE_EVENT
