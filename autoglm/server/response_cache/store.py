"""Where the response cache keeps answers: the interface its two places share."""
from __future__ import annotations

from typing import Protocol


class CacheStore(Protocol):
    """Bytes by key. A store that fails answers a miss and skips the put: the cache never fails a request."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes) -> None: ...

    async def close(self) -> None: ...
