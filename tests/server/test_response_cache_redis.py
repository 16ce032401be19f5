"""The response cache in a real redis-server: replicas share answers, each entry expires after the TTL,
answers over the largest entry are not kept, and a Redis gone away serves requests uncached with a warning."""
from __future__ import annotations

import asyncio

import httpx
import pytest
import redis

from autoglm.server.response_cache.outcome import CACHE_HEADER
from autoglm.server.response_cache.redis_store import KEY_PREFIX, RedisStore
from tests.server.live_server import free_port, start_server
from tests.server.redis_server import running_redis

GREEDY = {"max_tokens": 8, "temperature": 0, "ignore_eos": True}

pytestmark = pytest.mark.timeout(240)


def complete(url: str, prompt: str = "Shared") -> httpx.Response:
    answer = httpx.post(url + "/v1/completions", json={**GREEDY, "prompt": prompt}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


def test_entries_expire_after_the_ttl(tmp_path):
    async def run(url: str) -> bytes | None:
        store = RedisStore(url, ttl_s=90)
        await store.put("answer", b"kept")
        value = await store.get("answer")
        await store.close()
        return value

    with running_redis(tmp_path) as server:
        assert asyncio.run(run(server.url)) == b"kept"
        left_ms = redis.Redis.from_url(server.url).pttl(KEY_PREFIX + "answer")
    assert 85_000 < left_ms <= 90_000


def test_two_replicas_share_answers_and_large_ones_are_not_kept(chat_model, tmp_path):
    with running_redis(tmp_path) as server:
        replicas = [start_server(chat_model, response_cache=server.url) for _ in range(2)]
        try:
            first, second = (complete(replica.url) for replica in replicas)
        finally:
            for replica in replicas:
                replica.stop()
        keys = redis.Redis.from_url(server.url).keys(KEY_PREFIX + "*")
        small = start_server(chat_model, response_cache=server.url, response_cache_max_entry_bytes=100)
        try:
            large = [complete(small.url, "Too long to keep").headers[CACHE_HEADER] for _ in range(2)]
        finally:
            small.stop()
    assert (first.headers[CACHE_HEADER], second.headers[CACHE_HEADER]) == ("miss", "hit")
    assert second.json()["choices"] == first.json()["choices"]
    assert len(keys) == 1
    assert large == ["miss", "miss"]


def test_a_redis_that_cannot_be_reached_serves_uncached_and_warns_once(chat_model, caplog):
    server = start_server(chat_model, response_cache=f"redis://127.0.0.1:{free_port()}")
    try:
        with caplog.at_level("WARNING", logger="autoglm.server.response_cache.redis_store"):
            answers = [complete(server.url) for _ in range(2)]
    finally:
        server.stop()
    assert [answer.headers[CACHE_HEADER] for answer in answers] == ["miss", "miss"]
    assert answers[0].json()["choices"] == answers[1].json()["choices"]
    warnings = [record for record in caplog.records if "cannot be reached" in record.getMessage()]
    assert len(warnings) == 1
