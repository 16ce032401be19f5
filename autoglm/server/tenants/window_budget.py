"""Budgets counted in windows cut from the clock (minute 0 of the epoch, minute 1, ...), kept in a `limits`
storage: a reservation is taken whole or not at all, and what it did not use is given back while its
window lasts.

Taking is one atomic increment, undone when it crosses the limit, so concurrent requests (of one process
or of replicas sharing a Redis) can never all pass on the same remaining budget; a request that loses
the race may be refused while another's undo is under way, never let in past the limit. Every window is
its own counter, so a late refund can never lend a later window what an earlier one held.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from limits.aio.storage import Storage

from autoglm.server.tenants.rate_limit_headers import WindowState
from autoglm.server.tenants.storage_outage import StorageOutage

_NAMESPACE = "autoglm"
Clock = Callable[[], float]


@dataclass(frozen=True)
class Reservation:
    """`amount` taken from the counter `key` of a window of `length_s`, which ends at `window_end` on the clock."""

    key: str
    length_s: int
    window_end: float
    amount: int


class WindowFull(Exception):
    """The reservation would cross the window's limit; nothing was taken."""

    def __init__(self, window: WindowState) -> None:
        super().__init__(f"{window.remaining} of {window.limit} left")
        self.window = window


class WindowBudgets:
    """Named budgets of `limit` per window of `length_s` seconds. Every storage call raises limits'
    StorageError when the storage cannot be reached; `outage` logs that once per outage."""

    def __init__(self, storage: Storage, clock: Clock = time.time) -> None:
        self._storage = storage
        self._clock = clock
        self.outage = StorageOutage()

    async def take(self, name: str, limit: int, length_s: int, amount: int) -> Reservation:
        """Reserve `amount` in the current window of `name`, or raise WindowFull with what is left."""
        key, end = self._window(name, length_s)
        used = await self.outage.watch(self._storage.incr(key, _expiry(length_s), amount))
        if used <= limit:
            return Reservation(key, length_s, end, amount)
        await self.outage.watch(self._storage.incr(key, _expiry(length_s), -amount))
        raise WindowFull(WindowState(limit=limit, remaining=max(0, limit - (used - amount)),
                                     reset_s=max(0.0, end - self._clock())))

    async def give_back(self, reservation: Reservation, amount: int) -> None:
        """Return `amount` of `reservation` to its own window; nothing to do once that window has ended, since
        no one reads its counter any more."""
        if amount > 0 and self._clock() < reservation.window_end:
            await self.outage.watch(self._storage.incr(reservation.key, _expiry(reservation.length_s), -amount))

    async def state(self, name: str, limit: int, length_s: int) -> WindowState:
        """The current window of `name`: what is left of `limit` and when it ends."""
        key, end = self._window(name, length_s)
        used = await self.outage.watch(self._storage.get(key))
        return WindowState(limit=limit, remaining=max(0, limit - used), reset_s=max(0.0, end - self._clock()))

    def _window(self, name: str, length_s: int) -> tuple[str, float]:
        """The counter of the window that holds now, and when that window ends."""
        index = int(self._clock() // length_s)
        return f"{_NAMESPACE}/{name}/{length_s}s/{index}", float((index + 1) * length_s)


def _expiry(length_s: int) -> int:
    """A counter outlives its window by a whole window, so a refund within the window always finds it."""
    return 2 * length_s
