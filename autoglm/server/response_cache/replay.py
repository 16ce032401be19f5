"""Noting an answer as it goes out, and sending a noted answer again as the engine's outputs."""
from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

from autoglm.outputs import RequestMetrics, RequestOutput
from autoglm.engine.request_stream import IndexedOutput
from autoglm.server.response_cache.answer import CachedAnswer


async def recording(outputs: AsyncGenerator[IndexedOutput, None],
                    keep: Callable[[CachedAnswer], Awaitable[None]]) -> AsyncGenerator[IndexedOutput, None]:
    """`outputs` passed through, each noted as it goes by; once the last is through, the whole answer goes
    to `keep`. An answer cut short (an error, a timeout, the reader gone) never reaches it.

    Closing this closes `outputs`, which aborts the engine's requests, as closing them directly would.
    """
    answer = CachedAnswer()
    try:
        async for prompt_index, delta in outputs:
            answer.note(prompt_index, delta)
            yield prompt_index, delta
    finally:
        await outputs.aclose()
    await keep(answer)


async def replay(answer: CachedAnswer, request_id: str, arrival_time: float,
                 count: Callable[[RequestOutput], object]) -> AsyncGenerator[IndexedOutput, None]:
    """The answer's steps as engine outputs of request `request_id`, in the order they first came, each
    shown to `count` as the engine shows its outputs to the request's tracker."""
    for step in answer.steps:
        prompt = answer.prompts[step.prompt_index]
        output = RequestOutput(
            request_id=f"{request_id}-{step.prompt_index}",
            prompt=prompt.prompt,
            prompt_token_ids=prompt.prompt_token_ids,
            outputs=step.outputs,
            finished=step.finished,
            metrics=RequestMetrics(arrival_time),
            prompt_logprobs=step.prompt_logprobs,
            num_cached_tokens=prompt.num_cached_tokens,
        )
        count(output)
        yield step.prompt_index, output
