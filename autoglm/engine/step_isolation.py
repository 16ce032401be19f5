"""Finding the request that makes engine steps fail, so that it alone ends.

A failed step leaves the KV it was writing unknown, so every sequence that was running computes
its KV again from the start (as after a preemption) and loses nothing it had generated. If the
step held one request, that request caused it. Otherwise each of them runs alone, in turn, until
it gains a token or ends: one that fails alone is the cause; the others go on. A failure that only
a combination of requests provokes is not pinned on anyone, but every request gains a token in
each such round, so the engine still makes progress.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepIsolation:
    """The requests still to run alone, the first of them running now."""

    suspects: list[str] = field(default_factory=list)

    @property
    def isolated(self) -> str | None:
        """The request the scheduler admits alone this step; None: everyone runs together."""
        return self.suspects[0] if self.suspects else None

    def suspect(self, request_ids: list[str]) -> None:
        self.suspects.extend(request_id for request_id in request_ids if request_id not in self.suspects)

    def clear(self, request_id: str) -> None:
        """The request ran alone without failing, or ended: it is no longer suspected."""
        if request_id in self.suspects:
            self.suspects.remove(request_id)
