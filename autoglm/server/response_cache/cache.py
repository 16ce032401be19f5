"""Serving a deterministic request from the cache, or from the engine while noting its answer for next time."""
from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from fastapi import Request

from autoglm.config import ConfigError, ServerConfig
from autoglm.engine.sequence import TenantTag
from autoglm.sampling_params import SamplingParams
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.versions.served_version import ServedVersion
from autoglm.server.openai.protocol import GenerationRequest
from autoglm.engine.request_stream import IndexedOutput
from autoglm.server.response_cache.answer import CachedAnswer, decode_answer, encode_answer
from autoglm.server.response_cache.key import is_deterministic, response_cache_key
from autoglm.server.response_cache.memory_store import MemoryStore
from autoglm.server.response_cache.outcome import CACHE_HEADER, CacheOutcome
from autoglm.server.response_cache.replay import recording, replay
from autoglm.server.response_cache.store import CacheStore
from autoglm.server.tenants.rate_limit_storage import REDIS_EXTRA
from autoglm.server.observability.tracking import RequestTracker

logger = logging.getLogger(__name__)

MEMORY = "memory"


class ResponseCache:
    """Complete answers of deterministic requests, by exact model version, tenant and request.

    Two identical requests at once both run: the cache saves repeats, it does not merge requests in flight.
    """

    def __init__(self, store: CacheStore, max_entry_bytes: int, metrics: ServerMetrics) -> None:
        self.store = store
        self.max_entry_bytes = max_entry_bytes
        self.metrics = metrics

    def lookup(self, raw: Request, body: GenerationRequest, params: SamplingParams, served: ServedVersion,
               tenant: TenantTag | None, image_hashes: tuple[bytes, ...] = ()) -> CacheLookup:
        """The request's place in the cache; nowhere (bypass) when its answer is not fixed. Tenants share
        answers where they share cached prefixes: under one cache_salt."""
        key = None
        if is_deterministic(params):
            key = response_cache_key(served.version_id, served.answer_source.digest,
                                     tenant.salt if tenant is not None else None, raw.url.path, body, image_hashes)
        return CacheLookup(self, key, served.version_id)

    async def keep(self, key: str, answer: CachedAnswer) -> None:
        value = encode_answer(answer)
        if len(value) > self.max_entry_bytes:
            logger.debug("an answer of %d bytes is not cached: response_cache_max_entry_bytes is %d",
                         len(value), self.max_entry_bytes)
            return
        await self.store.put(key, value)

    async def close(self) -> None:
        await self.store.close()


@dataclass
class CacheLookup:
    """One request's dealings with the cache: its key (None when not deterministic) and what was done."""

    cache: ResponseCache
    key: str | None
    version_id: str
    outcome: CacheOutcome = CacheOutcome.BYPASS

    async def outputs(self, generate: Callable[[], AsyncGenerator[IndexedOutput, None]],
                      tracker: RequestTracker) -> AsyncGenerator[IndexedOutput, None]:
        """The cached answer replayed, if there is one; else `generate()`'s outputs, kept once complete."""
        if self.key is None:
            tracker.cache = self.outcome
            return generate()
        stored = await self.cache.store.get(self.key)
        self.outcome = CacheOutcome.HIT if stored is not None else CacheOutcome.MISS
        self.cache.metrics.count_response_cache(self.version_id, hit=stored is not None)
        tracker.cache = self.outcome
        if stored is not None:
            return replay(decode_answer(stored), tracker.request_id, tracker.arrival_time, tracker.count)
        key = self.key
        return recording(generate(), lambda answer: self.cache.keep(key, answer))

    @property
    def headers(self) -> dict[str, str]:
        return {CACHE_HEADER: self.outcome.value}


def response_cache_from_config(config: ServerConfig, metrics: ServerMetrics) -> ResponseCache | None:
    """The cache the response_cache setting names; None when it is off. A Redis URL without its client
    stops the start."""
    cache = config.response_cache
    if cache.response_cache is None:
        return None
    store: CacheStore
    if cache.response_cache == MEMORY:
        store = MemoryStore(cache.response_cache_max_bytes, cache.response_cache_ttl_s)
    else:
        try:
            from autoglm.server.response_cache.redis_store import RedisStore
        except ImportError as error:
            raise ConfigError(f"response_cache is a Redis URL, but its client cannot be loaded ({error}); "
                              f"install it with: pip install '{REDIS_EXTRA}'") from None
        store = RedisStore(cache.response_cache, cache.response_cache_ttl_s)
    return ResponseCache(store, cache.response_cache_max_entry_bytes, metrics)
