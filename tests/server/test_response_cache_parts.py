"""The response cache's parts without a server: its key, the memory store's LRU by bytes and expiry,
the largest entry kept, an answer noted only when complete, and its round trip through bytes."""
from __future__ import annotations

import asyncio
import math

import pytest

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from autoglm.sampling_params import SamplingParams
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.openai.protocol import ChatCompletionRequest, CompletionRequest
from autoglm.server.response_cache.answer import CachedAnswer, decode_answer, encode_answer
from autoglm.server.response_cache.cache import ResponseCache
from autoglm.server.response_cache.key import is_deterministic, response_cache_key
from autoglm.server.response_cache.memory_store import MemoryStore
from autoglm.server.response_cache.replay import recording, replay

COMPLETIONS = "/v1/completions"


def key(body: dict[str, object], version: str = "tiny@1", tenant: str | None = None,
        route: str = COMPLETIONS, source: str = "weights-a") -> str:
    return response_cache_key(version, source, tenant, route, CompletionRequest.model_validate(body))


def delta(text: str, token_ids: list[int], finished: bool = False) -> RequestOutput:
    completion = CompletionOutput(0, text, token_ids, logprobs=[{token: Logprob(-math.inf, 1)} for token in token_ids],
                                  finish_reason="length" if finished else None)
    return RequestOutput("r", "Hi", [1, 2], [completion], finished, RequestMetrics(0.0), num_cached_tokens=1)


async def engine_outputs(*deltas: RequestOutput, error: Exception | None = None):
    for item in deltas:
        yield 0, item
    if error is not None:
        raise error


def test_greedy_and_seeded_requests_are_deterministic_and_unseeded_sampling_is_not():
    assert is_deterministic(SamplingParams(temperature=0))
    assert is_deterministic(SamplingParams(temperature=0.8, seed=7, n=4))
    assert not is_deterministic(SamplingParams(temperature=0.8))
    assert not is_deterministic(SamplingParams(temperature=0.8, n=4))


BASE = {"prompt": "Hi", "temperature": 0, "max_tokens": 8}


@pytest.mark.parametrize("change", [
    {"prompt": "Hello"}, {"max_tokens": 9}, {"temperature": 0.5, "seed": 1}, {"seed": 2}, {"top_p": 0.5},
    {"top_k": 3}, {"min_p": 0.1}, {"presence_penalty": 1.0}, {"frequency_penalty": 1.0},
    {"repetition_penalty": 1.2}, {"stop": "x"}, {"n": 2}, {"best_of": 2}, {"logprobs": 2}, {"echo": True},
    {"ignore_eos": True}, {"min_tokens": 2}, {"stop_token_ids": [3]}, {"skip_special_tokens": False},
    {"include_stop_str_in_output": True}, {"logit_bias": {"5": 1.0}},
    {"response_format": {"type": "json_object"}},
    {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "integer"}}}},
    {"structured_outputs": {"regex": "[a-z]+"}}, {"guided_regex": "[a-z]+"}, {"guided_json": {"type": "integer"}},
    {"guided_choice": ["yes", "no"]}, {"guided_grammar": 'root ::= "a"'},
])
def test_every_field_that_changes_the_answer_changes_the_key(change):
    assert key({**BASE, **change}) != key(BASE)


def test_each_output_constraint_has_keys_of_its_own():
    def schema_key(schema: dict[str, object]) -> str:
        return key({**BASE, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}})

    assert schema_key({"type": "integer"}) != schema_key({"type": "string"})
    assert key({**BASE, "guided_regex": "a+"}) != key({**BASE, "guided_regex": "b+"})


@pytest.mark.parametrize("change", [
    {"stream": True}, {"stream": True, "stream_options": {"include_usage": True}}, {"user": "someone"},
    {"priority": 5}, {"model": "tiny@stable"},
])
def test_delivery_the_asker_and_the_model_alias_do_not_change_the_key(change):
    assert key({**BASE, **change}) == key(BASE)


def test_the_version_answer_source_tenant_and_route_are_part_of_the_key():
    assert key(BASE, version="tiny@2") != key(BASE, version="tiny@1")
    assert key(BASE, source="weights-b") != key(BASE, source="weights-a")
    assert key(BASE, tenant="team-a") != key(BASE, tenant="team-b") != key(BASE)
    chat = response_cache_key("tiny@1", "weights-a", None, "/v1/chat/completions",
                              ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "Hi"}]}))
    assert chat != key({"prompt": "Hi"})


def test_two_versions_never_share_an_entry():
    async def run() -> tuple[object, object]:
        cache = ResponseCache(MemoryStore(10_000, 60), 10_000, ServerMetrics("tiny", lambda: None))
        await cache.keep(key(BASE, version="tiny@1"), CachedAnswer())
        return (await cache.store.get(key(BASE, version="tiny@1")), await cache.store.get(key(BASE, version="tiny@2")))

    kept, other = asyncio.run(run())
    assert kept is not None and other is None


def test_the_memory_store_drops_the_least_recently_used_once_past_its_bytes():
    async def run() -> list[bytes | None]:
        entry = 10 + len("a")  # a key of one character and ten bytes
        store = MemoryStore(max_bytes=3 * entry, ttl_s=60)
        for name in "abc":
            await store.put(name, b"x" * 10)
        await store.get("a")  # now b is the least recently used
        await store.put("d", b"x" * 10)
        assert store.size_bytes == 3 * entry
        return [await store.get(name) for name in "abcd"]

    assert asyncio.run(run()) == [b"x" * 10, None, b"x" * 10, b"x" * 10]


def test_memory_entries_expire_after_the_ttl():
    now = [100.0]

    async def run() -> list[bytes | None]:
        store = MemoryStore(max_bytes=1000, ttl_s=30, clock=lambda: now[0])
        await store.put("a", b"answer")
        now[0] += 29.9
        before = await store.get("a")
        now[0] += 0.1
        return [before, await store.get("a"), store.size_bytes]

    assert asyncio.run(run()) == [b"answer", None, 0]


def test_an_answer_over_the_largest_entry_is_not_kept():
    answer = CachedAnswer()
    answer.note(0, delta("Hello", [5, 6], finished=True))
    size = len(encode_answer(answer))

    async def kept(max_entry_bytes: int) -> bool:
        cache = ResponseCache(MemoryStore(10**6, 60), max_entry_bytes, ServerMetrics("tiny", lambda: None))
        await cache.keep("k", answer)
        return await cache.store.get("k") is not None

    assert asyncio.run(kept(size)) and not asyncio.run(kept(size - 1))


def test_an_answer_goes_through_bytes_unchanged_minus_infinity_included():
    answer = CachedAnswer()
    answer.note(0, delta("Hel", [5, 6]))
    answer.note(0, delta("lo", [7], finished=True))
    assert decode_answer(encode_answer(answer)) == answer


def test_only_a_complete_answer_is_kept_and_its_replay_gives_the_same_outputs():
    kept: list[CachedAnswer] = []

    async def keep(answer: CachedAnswer) -> None:
        kept.append(answer)

    async def read_all(outputs) -> list[RequestOutput]:
        return [output async for _, output in outputs]

    async def run() -> None:
        with pytest.raises(TimeoutError):
            await read_all(recording(engine_outputs(delta("a", [5]), error=TimeoutError()), keep))
        abandoned = recording(engine_outputs(delta("a", [5]), delta("b", [6], finished=True)), keep)
        await anext(abandoned)
        await abandoned.aclose()  # the reader went away
        assert kept == []
        await read_all(recording(engine_outputs(delta("a", [5]), delta("b", [6], finished=True)), keep))

    asyncio.run(run())
    (answer,) = kept
    counted: list[RequestOutput] = []
    replayed = asyncio.run(read_all(replay(decode_answer(encode_answer(answer)), "cmpl-1", 0.0, counted.append)))
    assert [(o.outputs[0].text, o.outputs[0].token_ids, o.finished, o.num_cached_tokens) for o in replayed] == [
        ("a", [5], False, 1), ("b", [6], True, 1)]
    assert counted == replayed


def test_the_response_cache_setting():
    assert AutoGLMConfig().response_cache is None
    assert AutoGLMConfig(response_cache="off").response_cache is None
    assert AutoGLMConfig(response_cache="redis://cache:6379/2").response_cache == "redis://cache:6379/2"
    assert AutoGLMConfig(response_cache_max_bytes="2MiB").response_cache_max_bytes == 2 * 1024**2
    with pytest.raises(ConfigError, match="expected 'memory', 'redis://HOST:PORT"):
        AutoGLMConfig(response_cache="disk")
