"""One HTTP request's outputs on their way from the engine thread to the handler that reads them.

The engine sends each step's output in the request's kind: a delta (only what is new, the server's
kind) or the whole so far (CUMULATIVE). A reader that falls behind (a slow streaming client) does not
make a backlog of them: each prompt holds at most one pending output, later deltas merged into it and
a later whole replacing it, so an idle reader costs memory in proportion to the text it has not read
yet. Its sequences keep running meanwhile.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from autoglm.outputs import RequestOutput, add_delta

# A prompt's index in its HTTP request, and what its engine request produced since the last read.
IndexedOutput = tuple[int, RequestOutput]
# Sees each step's output as it arrives, however late the reader: for latency metrics and token counts.
DeltaObserver = Callable[[RequestOutput], None]


class RequestStream:
    """Filled and read on the event loop; the engine thread reaches it with ``call_soon_threadsafe``."""

    def __init__(self, observe: DeltaObserver | None = None, cumulative: bool = False) -> None:
        self._observe = observe
        self._cumulative = cumulative  # each output holds the whole so far, not what is new
        self._pending: dict[int, RequestOutput] = {}
        self._error: BaseException | None = None
        self._ready = asyncio.Event()

    def put(self, prompt_index: int, output: RequestOutput) -> None:
        if self._observe is not None:
            self._observe(output)
        if self._cumulative:
            self._pending[prompt_index] = output
        else:
            add_delta(self._pending, prompt_index, output)
        self._ready.set()

    def fail(self, error: BaseException) -> None:
        """End the stream with `error`, raised once the outputs already pending have been read."""
        self._error = error
        self._ready.set()

    def pending(self, prompt_index: int) -> RequestOutput | None:
        """What the reader has not taken yet for this prompt, merged into one output."""
        return self._pending.get(prompt_index)

    async def take(self) -> list[IndexedOutput]:
        """Everything pending, in prompt order, waiting for some if there is none; raises the
        stream's error once nothing is pending."""
        await self._ready.wait()
        if not self._pending:
            assert self._error is not None
            raise self._error
        taken = sorted(self._pending.items())
        self._pending = {}
        if self._error is None:
            self._ready.clear()
        return taken
