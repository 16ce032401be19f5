"""Where the `limits` library keeps tenants' counters: this process's memory, or a Redis every replica shares."""
from __future__ import annotations

from limits.aio.storage import Storage
from limits.errors import ConfigurationError
from limits.storage import storage_from_string

from autoglm.config import ConfigError

MEMORY_STORAGE = "memory://"
REDIS_EXTRA = "open-autoglm[redis]"
# Connections to Redis this process keeps open; more requests at once wait for one to be free, instead of
# failing as redis-py's default pool makes them (a 503 for the 101st request in flight).
REDIS_CONNECTIONS = 64


def rate_limit_storage(url: str) -> Storage:
    """The async storage for the rate_limit_storage setting (already checked to be memory:// or redis://...).

    Its failures come wrapped as limits' StorageError, so a Redis gone away is told apart from a bug.
    """
    if url == MEMORY_STORAGE:
        return storage_from_string("async+memory://", wrap_exceptions=True)
    try:
        from redis.asyncio import BlockingConnectionPool

        pool = BlockingConnectionPool.from_url(url, max_connections=REDIS_CONNECTIONS)
        return storage_from_string(f"async+{url}", implementation="redispy", wrap_exceptions=True,
                                   connection_pool=pool)
    except (ImportError, ConfigurationError) as error:
        raise ConfigError(f"rate_limit_storage is a Redis URL, but its client cannot be loaded ({error}); "
                          f"install it with: pip install '{REDIS_EXTRA}'") from None
