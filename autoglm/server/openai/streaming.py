"""Server-sent events: what each choice gained since the last chunk, and the response that carries them."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass

from pydantic import BaseModel
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from autoglm.outputs import PositionLogprobs, RequestOutput
from autoglm.server.openai.errors import APIError

DONE_EVENT = "data: [DONE]\n\n"


def sse_event(data: str, name: str | None = None) -> str:
    """One server-sent event; ``name`` its ``event:`` line (Anthropic's and the Responses API's streams name
    each event, OpenAI's chat and completions streams do not)."""
    return f"data: {data}\n\n" if name is None else f"event: {name}\ndata: {data}\n\n"


class ChunkStream(ABC):
    """The stream framing of OpenAI's chat and completions routes: each delta one unnamed ``chunk``, usage as a
    last chunk when asked, an error as its body, then ``[DONE]``. A builder mixes it in and defines ``chunk``
    and ``usage_chunk``."""

    @abstractmethod
    def chunk(self, delta: ChoiceDelta, output: RequestOutput) -> BaseModel:
        """One choice's new text (and tokens, log-probs) as a chunk."""

    @abstractmethod
    def usage_chunk(self, usage: BaseModel) -> BaseModel:
        """The chunk that closes a stream with the request's usage."""

    def opening_events(self) -> list[str]:
        return []

    def delta_events(self, delta: ChoiceDelta, output: RequestOutput) -> list[str]:
        return [sse_event(self.chunk(delta, output).model_dump_json())]

    def closing_events(self, usage: BaseModel, include_usage: bool) -> list[str]:
        return ([sse_event(self.usage_chunk(usage).model_dump_json())] if include_usage else []) + [DONE_EVENT]

    def error_events(self, error: APIError) -> list[str]:
        return [sse_event(error.body.model_dump_json()), DONE_EVENT]


@dataclass
class ChoiceDelta:
    """New text of one choice; tokens and log-probs since the last delta of that choice."""

    index: int
    text: str
    text_offset: int  # characters of this choice sent before `text`
    token_ids: list[int]
    logprobs: list[PositionLogprobs] | None
    finish_reason: str | None
    is_first: bool
    prompt_logprobs: list[PositionLogprobs | None] | None  # the prompt's, with each choice's first delta


class DeltaTracker:
    """Places the engine's deltas of one prompt's choices in the stream: where each one's text
    starts, and whether it is that choice's first (which carries the prompt's log-probs; the
    engine sends them once, with the prompt's first delta).

    A choice gets a delta for every engine output that gave it new tokens, even when their text
    is still held back (a possible stop string, a partial character) and comes later: clients
    still see each token arrive, as vLLM streams them.
    """

    def __init__(self, n: int) -> None:
        self._text_sent = [0] * n
        self._started = [False] * n
        self._prompt_logprobs: list[PositionLogprobs | None] | None = None

    def advance(self, output: RequestOutput) -> list[ChoiceDelta]:
        if output.prompt_logprobs is not None:
            self._prompt_logprobs = output.prompt_logprobs
        deltas = []
        for completion in output.outputs:
            index = completion.index
            is_first = not self._started[index]
            deltas.append(ChoiceDelta(
                index=index,
                text=completion.text,
                text_offset=self._text_sent[index],
                token_ids=completion.token_ids,
                logprobs=completion.logprobs,
                finish_reason=completion.finish_reason,
                is_first=is_first,
                prompt_logprobs=self._prompt_logprobs if is_first else None,
            ))
            self._text_sent[index] += len(completion.text)
            self._started[index] = True
        return deltas


class EventStreamResponse(StreamingResponse):
    """A text/event-stream response that always closes its event generator.

    Starlette cancels a stream whose client went away but leaves the generator to the garbage
    collector; closing it here runs its cleanup (aborting the request) at once.
    """

    def __init__(self, events: AsyncGenerator[str, None], headers: Mapping[str, str] | None = None) -> None:
        super().__init__(events, headers=headers, media_type="text/event-stream")
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._events.aclose()
