"""The response cache in a Redis that every replica naming it shares; each answer expires on its own."""
from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

# Every key the cache writes starts so, to be told apart from other data in the same Redis database.
KEY_PREFIX = "autoglm:response:"
# A Redis that does not answer within this costs a request no more than this, once for a get and once
# for a put, before the request is served without the cache.
REDIS_TIMEOUT_S = 0.5


class RedisStore:
    """Answers in Redis, each expiring `ttl_s` after it was put.

    A Redis that cannot be reached makes every get a miss and every put a no-op, never a failed request;
    a warning says so once, and a line says when it answers again.
    """

    def __init__(self, url: str, ttl_s: float) -> None:
        self._client = Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)
        self._ttl_ms = max(1, round(ttl_s * 1000))
        self._reachable = True

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._client.get(KEY_PREFIX + key)
        except RedisError as error:
            self._lost(error)
            return None
        self._answered()
        return value

    async def put(self, key: str, value: bytes) -> None:
        try:
            await self._client.set(KEY_PREFIX + key, value, px=self._ttl_ms)
        except RedisError as error:
            self._lost(error)
            return
        self._answered()

    async def close(self) -> None:
        await self._client.aclose()

    def _lost(self, error: RedisError) -> None:
        if self._reachable:
            logger.warning("the response cache's Redis cannot be reached (%s: %s); requests are served without "
                           "the cache until it answers again", type(error).__name__, error)
        self._reachable = False

    def _answered(self) -> None:
        if not self._reachable:
            logger.info("the response cache's Redis answers again")
        self._reachable = True
