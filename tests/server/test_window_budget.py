"""Budgets in windows of the clock: taken whole or not at all, given back only to the window they came from."""
from __future__ import annotations

import asyncio

import pytest
from limits.storage import storage_from_string

from autoglm.server.tenants.window_budget import WindowBudgets, WindowFull
from tests.server.manual_clock import ManualClock

MINUTE = 60


def budgets(clock: ManualClock) -> WindowBudgets:
    return WindowBudgets(storage_from_string("async+memory://"), clock)


def test_a_reservation_that_does_not_fit_takes_nothing():
    async def run() -> tuple[int, int]:
        clock = ManualClock()
        kept = budgets(clock)
        await kept.take("team", 20, MINUTE, 15)
        with pytest.raises(WindowFull) as full:
            await kept.take("team", 20, MINUTE, 6)
        assert (full.value.window.remaining, full.value.window.reset_s) == (5, MINUTE)
        await kept.take("team", 20, MINUTE, 5)  # the refused 6 left all of the 5 it could not use
        return (await kept.state("team", 20, MINUTE)).remaining, full.value.window.limit

    assert asyncio.run(run()) == (0, 20)


def test_a_refund_goes_back_to_its_own_window_only():
    async def run() -> list[int]:
        clock = ManualClock()
        kept = budgets(clock)
        first = await kept.take("team", 20, MINUTE, 12)
        await kept.give_back(first, 4)
        remaining = [(await kept.state("team", 20, MINUTE)).remaining]
        late = await kept.take("team", 20, MINUTE, 8)
        clock.advance(MINUTE)
        await kept.take("team", 20, MINUTE, 20)
        await kept.give_back(late, 8)  # its window has ended: the new one must not gain it
        remaining.append((await kept.state("team", 20, MINUTE)).remaining)
        return remaining

    assert asyncio.run(run()) == [12, 0]
