"""Server-sent events: what each choice gained since the last chunk, and the response that carries them."""
from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from autoglm.outputs import PositionLogprobs, RequestOutput

DONE_EVENT = "data: [DONE]\n\n"


def sse_event(data: str) -> str:
    return f"data: {data}\n\n"


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


class DeltaTracker:
    """Turns cumulative engine outputs into per-choice deltas, computed by length.

    A choice gets a delta for every step that gave it new tokens, and when it finishes. Text
    still held back (a possible stop string, a partial character) comes in a later delta, so
    a delta's text may be empty: clients still see each token arrive, as vLLM streams them.
    """

    def __init__(self, n: int) -> None:
        self._text_sent = [0] * n
        self._tokens_sent = [0] * n
        self._finished = [False] * n

    def advance(self, output: RequestOutput) -> list[ChoiceDelta]:
        deltas = []
        for completion in output.outputs:
            index = completion.index
            text = completion.text[self._text_sent[index]:]
            new_tokens = len(completion.token_ids) > self._tokens_sent[index]
            if self._finished[index] or not (text or new_tokens or completion.finished):
                continue
            tokens_sent = self._tokens_sent[index]
            deltas.append(ChoiceDelta(
                index=index,
                text=text,
                text_offset=self._text_sent[index],
                token_ids=completion.token_ids[tokens_sent:],
                logprobs=completion.logprobs[tokens_sent:] if completion.logprobs is not None else None,
                finish_reason=completion.finish_reason,
                is_first=tokens_sent == 0,
            ))
            self._text_sent[index] += len(text)
            self._tokens_sent[index] = len(completion.token_ids)
            self._finished[index] = completion.finished
        return deltas


class EventStreamResponse(StreamingResponse):
    """A text/event-stream response that always closes its event generator.

    Starlette cancels a stream whose client went away but leaves the generator to the garbage
    collector; closing it here runs its cleanup (aborting the request) at once.
    """

    def __init__(self, events: AsyncGenerator[str, None]) -> None:
        super().__init__(events, media_type="text/event-stream")
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._events.aclose()
