"""Stored responses in a Redis that every replica naming it shares.

A tenant's records sit in one hash, their expiry times in a sorted set and their bytes in a counter,
changed together by Lua scripts (atomic in Redis), each of which first deletes the records past their
time; the times come from this server's clock, so tests can move it.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from autoglm.server.responses_api.store import store_unavailable

logger = logging.getLogger(__name__)

# Every key the store writes starts so, to be told apart from other data in the same Redis database.
KEY_PREFIX = "autoglm:responses:"
# A Redis that does not answer within this fails the call (503) rather than holding the request.
REDIS_TIMEOUT_S = 5.0
# KEYS: the tenant's records (hash), expiry times (sorted set), bytes (counter); ARGV[1]: now.
_PURGE = """
local function purge(now)
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
  for _, id in ipairs(gone) do
    redis.call('DECRBY', KEYS[3], redis.call('HSTRLEN', KEYS[1], id))
    redis.call('HDEL', KEYS[1], id)
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
end
purge(ARGV[1])
"""
# ARGV[2]: the id, ARGV[3]: its expiry time, ARGV[4]: the record.
_PUT = _PURGE + """
redis.call('DECRBY', KEYS[3], redis.call('HSTRLEN', KEYS[1], ARGV[2]))
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('INCRBY', KEYS[3], string.len(ARGV[4]))
"""
_GET = _PURGE + "return redis.call('HGET', KEYS[1], ARGV[2])"
_DELETE = _PURGE + """
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('DECRBY', KEYS[3], redis.call('HSTRLEN', KEYS[1], ARGV[2]))
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""
_USED = _PURGE + "return tonumber(redis.call('GET', KEYS[3]) or '0')"


class RedisResponseStore:
    """A ResponseStore in the Redis at `url`; `clock` is the wall clock, given by tests to move time."""

    def __init__(self, url: str, retention_s: float, clock: Callable[[], float] = time.time) -> None:
        self._client = Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)
        self._retention_s = retention_s
        self._clock = clock
        self._put, self._get, self._delete, self._used = (self._client.register_script(script)
                                                          for script in (_PUT, _GET, _DELETE, _USED))

    async def put(self, tenant: str, response_id: str, record: bytes) -> None:
        await self._call(self._put, tenant, response_id, self._clock() + self._retention_s, record)

    async def get(self, tenant: str, response_id: str) -> bytes | None:
        return await self._call(self._get, tenant, response_id)

    async def delete(self, tenant: str, response_id: str) -> bool:
        return await self._call(self._delete, tenant, response_id) == 1

    async def used_bytes(self, tenant: str) -> int:
        return await self._call(self._used, tenant)

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, script: AsyncScript, tenant: str, *args: object) -> Any:
        keys = [f"{KEY_PREFIX}{tenant}:{part}" for part in ("records", "expiry", "bytes")]
        try:
            return await script(keys=keys, args=[self._clock(), *args])
        except RedisError:
            logger.exception("the stored responses' Redis cannot be reached")
            raise store_unavailable() from None
