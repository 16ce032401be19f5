"""Batch lines run below interactive traffic: the runner marks a line's ASGI scope with the priority it runs
at, and the generation routes give the engine that priority instead of a lower one the line's body asks for.

The mark lives in the scope's state, which only code inside the server can write, never a client.
"""
from __future__ import annotations

from fastapi import Request

BATCH_PRIORITY_STATE = "batch_line_priority"


def scheduling_priority(request: Request, asked: int) -> int:
    """The priority the engine schedules `request` at: the one it `asked` for, or for a batch line, the
    batch priority when that is lower (a larger number runs later)."""
    batch_priority: int | None = request.scope.get("state", {}).get(BATCH_PRIORITY_STATE)
    return asked if batch_priority is None else max(asked, batch_priority)
