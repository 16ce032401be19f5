"""The steps a pipeline-parallel engine has launched and not yet read: up to one per stage.

Each stage runs its batches in launch order, so while the last stage runs the oldest, the stages
before it run the newer ones. A sequence belongs to one batch in flight at most: the scheduler
passes over those in :attr:`Microbatches.seqs` until their step is read, so every plan knows each
of its tokens (none is deferred to a step still in the pipe), and a sequence's steps stay in order.
"""
from __future__ import annotations

from collections import deque

from autoglm.engine.async_scheduling import LaunchedStep
from autoglm.engine.sequence import Sequence


def seqs_per_microbatch(max_num_seqs: int, num_stages: int) -> int:
    """A step's share of ``max_num_seqs``, so that the running sequences fill every stage's batch."""
    return -(-max_num_seqs // num_stages)


class Microbatches:
    """Launched steps, oldest first, and the sequences they compute for (a set the scheduler reads)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth  # how many may be in flight: one per stage
        self.seqs: set[Sequence] = set()
        self._steps: deque[LaunchedStep] = deque()

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def full(self) -> bool:
        return len(self._steps) >= self.depth

    def push(self, step: LaunchedStep) -> None:
        self._steps.append(step)
        self.seqs.update(step.batch.seqs)

    def pop(self) -> LaunchedStep:
        """The oldest step, whose sequences may be scheduled again."""
        step = self._steps.popleft()
        self.seqs.difference_update(step.batch.seqs)
        return step

    def drain(self) -> None:
        """Run every step in flight through the last stage and drop its output: the stages stay in step with the
        engine, which recomputes those sequences (after a failed step)."""
        while self._steps:
            self.pop().pending.result()
