"""The two stores of responses, SQLite's and Redis's (a real redis-server), on a clock the test moves: records
kept by tenant, counted in bytes, deleted on request or once kept for the retention period; and the
SQLite store refused where Ray's replicas would each keep their own."""
from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis

from autoglm.config import AutoGLMConfig
from autoglm.server.openai.errors import APIError
from autoglm.server.responses_api.redis_store import RedisResponseStore
from autoglm.server.responses_api.sqlite_store import SqliteResponseStore
from autoglm.server.responses_api.store import ResponseStore
from autoglm.server.responses_api.stored import check_shared_store
from tests.server.manual_clock import ManualClock
from tests.server.redis_server import RedisServer, running_redis

pytestmark = pytest.mark.timeout(60)

RETENTION_S = 3600.0


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["sqlite", "redis"])
def store_on_clock(request, tmp_path) -> tuple[ResponseStore, ManualClock]:
    clock = ManualClock()
    if request.param == "sqlite":
        return SqliteResponseStore(tmp_path / "responses.sqlite", RETENTION_S, clock), clock
    server = request.getfixturevalue("redis_server")
    redis.Redis.from_url(server.url).flushdb()  # nothing of an earlier test's
    return RedisResponseStore(server.url, RETENTION_S, clock), clock


def run(store: ResponseStore, *calls) -> list[object]:
    """Each call (a store method and its arguments) in turn on one event loop, then the store closed."""
    async def in_turn() -> list[object]:
        try:
            return [await method(*args) for method, *args in calls]
        finally:
            await store.close()
    return asyncio.run(in_turn())


def test_records_are_kept_by_tenant_counted_and_deleted(store_on_clock):
    store, _ = store_on_clock
    record, larger = b'{"a": "record"}', b'{"a": "larger record"}'
    answers = run(store,
                  (store.put, "team-a", "resp_1", record), (store.get, "team-a", "resp_1"),
                  (store.get, "team-b", "resp_1"), (store.delete, "team-b", "resp_1"),
                  (store.used_bytes, "team-a"), (store.used_bytes, "team-b"),
                  (store.put, "team-a", "resp_1", larger), (store.used_bytes, "team-a"),
                  (store.delete, "team-a", "resp_1"), (store.get, "team-a", "resp_1"), (store.used_bytes, "team-a"))
    assert answers == [None, record, None, False, len(record), 0, None, len(larger), True, None, 0]


def test_a_record_is_deleted_once_kept_for_the_retention_period(store_on_clock):
    store, clock = store_on_clock

    async def later(seconds: float) -> None:
        clock.advance(seconds)

    answers = run(store,
                  (store.put, "team-a", "resp_old", b"old"), (later, RETENTION_S - 1),
                  (store.get, "team-a", "resp_old"), (store.put, "team-a", "resp_new", b"newer"), (later, 1),
                  (store.get, "team-a", "resp_old"), (store.get, "team-a", "resp_new"),
                  (store.used_bytes, "team-a"), (store.delete, "team-a", "resp_old"))
    assert answers == [None, None, b"old", None, None, None, b"newer", len(b"newer"), False]


def test_the_sqlite_store_is_refused_on_ray_with_several_replicas():
    check_shared_store(AutoGLMConfig(ray_max_replicas=1).server_config(), "store")
    check_shared_store(AutoGLMConfig(ray_max_replicas=4, responses_store="redis://127.0.0.1:6379").server_config(),
                       "store")
    with pytest.raises(APIError) as refused:
        check_shared_store(AutoGLMConfig(ray_max_replicas=4).server_config(), "previous_response_id")
    error = refused.value.body.error
    assert refused.value.status == 400 and error.param == "previous_response_id"
    assert "ray_max_replicas" in error.message and "responses_store: redis://" in error.message
