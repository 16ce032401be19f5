"""The response cache in this process's memory: least recently used answers go first once it is full."""
from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Entry:
    value: bytes
    expires_at: float  # on the store's clock

    def size(self, key: str) -> int:
        return len(key) + len(self.value)


class MemoryStore:
    """Holds at most `max_bytes` of keys and answers; each answer expires `ttl_s` after it was put.

    `clock` is monotonic seconds, given by tests to move time without waiting.
    """

    def __init__(self, max_bytes: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()  # least recently used first
        self.size_bytes = 0

    async def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= self._clock():
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return entry.value

    async def put(self, key: str, value: bytes) -> None:
        if key in self._entries:
            self._remove(key)
        entry = _Entry(value, self._clock() + self.ttl_s)
        self._entries[key] = entry
        self.size_bytes += entry.size(key)
        while self.size_bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))

    async def close(self) -> None:
        self._entries.clear()
        self.size_bytes = 0

    def _remove(self, key: str) -> None:
        self.size_bytes -= self._entries.pop(key).size(key)
