"""Streamed deltas: one per engine delta that produced tokens, even while their text is held back;
and a slow reader's pending output, which stays one merged delta of what it has not read (or, for a
cumulative request, the latest whole output)."""
from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import InvalidRequestError
from autoglm.outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput, add_delta
from autoglm.sampling_params import RequestOutputKind, SamplingParams
from autoglm.engine.async_engine import AsyncEngine
from autoglm.engine.request_stream import RequestStream
from autoglm.server.openai.streaming import DeltaTracker
from tests.server.live_server import BASE_SETTINGS


def delta(text: str, token_ids: list[int], finish_reason: str | None = None, index: int = 0,
          prompt_logprobs: list | None = None) -> RequestOutput:
    logprobs = [{token_id: Logprob(-1.0, 1)} for token_id in token_ids]
    completion = CompletionOutput(index=index, text=text, token_ids=token_ids, logprobs=logprobs,
                                  finish_reason=finish_reason)
    return RequestOutput(request_id="r", prompt=None, prompt_token_ids=[1, 2], outputs=[completion],
                         finished=finish_reason is not None, metrics=RequestMetrics(arrival_time=0.0),
                         prompt_logprobs=prompt_logprobs)


@asynccontextmanager
async def running(model: Path) -> AsyncIterator[AsyncEngine]:
    """An async engine of `model` started on the running loop, shut down on the way out."""
    engine = AsyncEngine(LLMEngine(AutoGLMConfig(model=str(model), **BASE_SETTINGS).engine_config()),
                         max_waiting_requests=4, request_timeout_s=60)
    engine.start()
    try:
        yield engine
    finally:
        await engine.shutdown()


def test_each_delta_with_new_tokens_gets_a_chunk_and_held_back_text_follows():
    tracker = DeltaTracker(1)
    steps = [
        delta("He", [5]),
        delta("", [6]),  # a possible stop string: the text waits, the token does not
        delta("llo", [7]),
        delta("!", [8], finish_reason="length"),
    ]
    sent = [chunk for step in steps for chunk in tracker.advance(step)]
    assert [(d.text, d.token_ids) for d in sent] == [("He", [5]), ("", [6]), ("llo", [7]), ("!", [8])]
    assert [d.text_offset for d in sent] == [0, 2, 2, 5]
    assert [d.is_first for d in sent] == [True, False, False, False]
    assert sent[-1].finish_reason == "length"


def test_each_choice_gets_the_prompt_logprobs_with_its_first_chunk():
    tracker = DeltaTracker(2)
    scored = [None, {2: Logprob(-0.5, 1)}]
    first = tracker.advance(delta("a", [5], prompt_logprobs=scored))
    later = tracker.advance(delta("b", [6]))
    child = tracker.advance(delta("c", [7], index=1))  # n = 2: the second choice starts a step later
    assert first[0].prompt_logprobs is scored and later[0].prompt_logprobs is None
    assert child[0].is_first and child[0].prompt_logprobs is scored


def test_a_stalled_reader_holds_one_merged_delta_of_exactly_its_unread_text():
    async def scenario() -> None:
        observed: list[int] = []  # tokens of each delta as it arrives, for the latency metrics
        stream = RequestStream(lambda arrived: observed.append(len(arrived.outputs[0].token_ids)))
        stream.put(0, delta("Hi", [5]))
        assert [output.outputs[0].text for _, output in await stream.take()] == ["Hi"]
        words = [f" w{i}" for i in range(200)]
        for i, word in enumerate(words):  # the reader is stalled while the engine steps on
            stream.put(0, delta(word, [100 + i], finish_reason="length" if i == len(words) - 1 else None))
        pending = stream.pending(0)
        (completion,) = pending.outputs
        assert completion.text == "".join(words) and completion.token_ids == list(range(100, 300))
        assert len(completion.logprobs) == len(words) and completion.finish_reason == "length"
        assert observed == [1] * 201
        ((index, output),) = await stream.take()
        assert index == 0 and output is pending and output.finished
        assert stream.pending(0) is None

    asyncio.run(scenario())


def test_an_error_comes_after_the_outputs_already_pending():
    async def scenario() -> None:
        stream = RequestStream()
        stream.put(0, delta("Hi", [5]))
        stream.fail(RuntimeError("engine gone"))
        assert len(await stream.take()) == 1
        with pytest.raises(RuntimeError, match="engine gone"):
            await stream.take()

    asyncio.run(scenario())


@pytest.mark.timeout(60)
def test_a_reader_that_falls_behind_gets_the_text_it_missed_in_one_output(chat_model):
    """The engine keeps stepping while the reader waits; its next read is everything it missed, merged."""
    params = SamplingParams(temperature=0, max_tokens=40, ignore_eos=True)

    async def scenario() -> None:
        async with running(chat_model) as engine:
            read_promptly: dict[int, RequestOutput] = {}
            async for index, output in engine.generate("prompt", ["Hello world"], params):
                add_delta(read_promptly, index, output)
            outputs = engine.generate("slow", ["Hello world"], params)
            _, first = await anext(outputs)
            # Stats are replaced after each step's outputs are handed over: once they count every
            # token of both requests (this engine's only ones; the first request's last step may not
            # be counted yet when its reader is done), the last delta is on its way and the reader
            # has read none of the others.
            while engine.stats.generation_tokens_total < 2 * 40:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0)
            rest = [output async for _, output in outputs]
        (missed,) = rest
        assert missed.finished and len(first.outputs[0].token_ids) + len(missed.outputs[0].token_ids) == 40
        assert first.outputs[0].text + missed.outputs[0].text == read_promptly[0].outputs[0].text

    asyncio.run(scenario())


def test_a_stalled_cumulative_reader_holds_only_the_latest_whole_output():
    async def scenario() -> None:
        stream = RequestStream(cumulative=True)
        wholes = [delta("Hi", [5]), delta("Hi there", [5, 6]), delta("Hi there!", [5, 6, 7], finish_reason="stop")]
        for whole in wholes:
            stream.put(0, whole)
        ((index, output),) = await stream.take()
        assert index == 0 and output is wholes[-1] and output.outputs[0].text == "Hi there!"

    asyncio.run(scenario())


@pytest.mark.timeout(60)
def test_the_async_engine_hands_out_cumulative_outputs_that_the_deltas_add_up_to(chat_model):
    params = SamplingParams(n=2, temperature=1.0, seed=5, max_tokens=12, ignore_eos=True, logprobs=1)

    async def scenario() -> tuple[dict[int, RequestOutput], list[RequestOutput]]:
        async with running(chat_model) as engine:
            summed: dict[int, RequestOutput] = {}
            async for index, output in engine.generate("delta", ["Hello world"], params):
                add_delta(summed, index, output)
            cumulative = dataclasses.replace(params, output_kind=RequestOutputKind.CUMULATIVE)
            wholes = [output async for _, output in engine.generate("cumulative", ["Hello world"], cumulative)]
        return summed, wholes

    summed, wholes = asyncio.run(scenario())
    for earlier, later in zip(wholes, wholes[1:]):
        for completion in earlier.outputs:
            grown = later.outputs[completion.index]
            assert grown.token_ids[:len(completion.token_ids)] == completion.token_ids
            assert grown.text.startswith(completion.text)
    last = wholes[-1]
    assert last.finished and [c.index for c in last.outputs] == [0, 1]
    for completion, expected in zip(last.outputs, summed[0].outputs, strict=True):
        assert (completion.text, completion.token_ids) == (expected.text, expected.token_ids)
        assert completion.logprobs == expected.logprobs and len(completion.logprobs) == 12


@pytest.mark.timeout(60)
def test_the_async_engine_refuses_a_request_id_while_a_request_under_it_is_open(chat_model):
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)

    async def scenario() -> None:
        async with running(chat_model) as engine:
            first = engine.generate("same", ["Hello world"], params)
            await anext(first)
            with pytest.raises(InvalidRequestError, match="request id 'same' is already in use"):
                await anext(engine.generate("same", ["Hello"], params))
            async for _, output in first:
                pass
            async for _, output in engine.generate("same", ["Hello"], params):  # free again once it ended
                pass
            assert output.finished

    asyncio.run(scenario())
