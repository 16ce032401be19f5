"""The choices a scheduler leaves to its policy: who is admitted first, who gets a step's token
budget first, and who gives up its blocks when the pool runs out.

The :class:`~autoglm.engine.sched.scheduler.Scheduler` keeps the mechanics (the token budget, the
sequence caps, blocks, prefix sharing, the progress guarantee) and asks its policy for these
orders every step, so a new policy is a subclass and the scheduler does not change. Keys may
change from step to step; the scheduler sorts its queues again each step.

The engine always schedules through :class:`FairSharePolicy`, which shares the engine between
tenants by weight and orders each tenant's own work by the ``scheduling_policy`` setting
(:class:`PriorityPolicy` or :class:`FcfsPolicy`). Requests without a tenant all belong to one
implicit tenant, so a server without keys, or the offline ``LLM``, orders exactly as that
setting's policy alone would: there is no separate "fair" setting to forget to turn on.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sequence import Sequence

PRIORITY_AGING_STEPS = 100


def is_decode(seq: Sequence) -> bool:
    """Only the newest token is left to compute: the sequence is generating, not reading a prompt."""
    return seq.num_tokens - seq.num_computed_tokens == 1


class SchedulerPolicy(ABC):
    """Orders sequences for a scheduler; subclasses define :meth:`queue_key`."""

    @abstractmethod
    def queue_key(self, seq: Sequence, step: int) -> tuple[Any, ...]:
        """Where ``seq`` sorts at scheduler step ``step``, waiting or running: lower first. The last
        element should be ``seq.seq_id``, so that no two sequences tie."""

    def budget_order(self, running: list[Sequence], step: int) -> list[Sequence]:
        """The order running sequences take the step's token budget: every decode first (one token
        each keeps every stream moving), then prompt chunks; each group in queue order."""
        ordered = sorted(running, key=lambda seq: self.queue_key(seq, step))
        return [seq for seq in ordered if is_decode(seq)] + [seq for seq in ordered if not is_decode(seq)]

    def preemption_victim(self, running: list[Sequence], step: int) -> Sequence:
        """The running sequence whose blocks are taken when another needs one and none is free:
        the last in queue order, the one the queue would have admitted last."""
        return max(running, key=lambda seq: self.queue_key(seq, step))

    def step_scheduled(self, batch: ScheduledBatch) -> None:
        """Told every step's work once it is chosen; a policy that orders by service received
        counts it here. Policies that order by what each sequence carries ignore it."""

    def sequence_queued(self, seq: Sequence) -> None:
        """Told each time ``seq`` joins the waiting queue: when it is added, and again after each preemption."""

    def sequence_finished(self, seq: Sequence) -> None:
        """Told when ``seq`` leaves for good (finished or aborted); possibly more than once, or for a
        sequence never queued (an n > 1 completion aborted before its prompt was read)."""

    def sequence_admitted(self, seq: Sequence, num_new_tokens: int) -> None:
        """Told of each admission as it is made, before the next of the same step is chosen; a
        policy that orders by service received can charge it at once, so that the step's next
        admission already sees it. The scheduler sorts the rest of the queue again after each."""


class PriorityPolicy(SchedulerPolicy):
    """Lower priority value first, aged so that none starves; first come, first served on ties.

    A sequence's priority value drops by one for every ``aging_steps`` steps since its request
    was queued. All requests age at the same rate, so two waiting requests never swap places:
    a request whose value is lower by d goes ahead of those queued fewer than
    ``d * aging_steps`` steps before it, and no further.
    """

    def __init__(self, aging_steps: int = PRIORITY_AGING_STEPS) -> None:
        if aging_steps < 1:
            raise ValueError(f"aging_steps must be at least 1, got {aging_steps}")
        self.aging_steps = aging_steps

    def queue_key(self, seq: Sequence, step: int) -> tuple[int, float, int]:
        # The aged priority in units of 1/aging_steps, in integers so that ties are exact.
        aged_priority = seq.priority * self.aging_steps - (step - seq.queued_step)
        return aged_priority, seq.arrival_time, seq.seq_id


class FcfsPolicy(SchedulerPolicy):
    """First come, first served: arrival order; request priorities are ignored."""

    def queue_key(self, seq: Sequence, step: int) -> tuple[float, int]:
        return seq.arrival_time, seq.seq_id


# The values of the ``scheduling_policy`` setting.
SCHEDULING_POLICIES: dict[str, type[SchedulerPolicy]] = {"priority": PriorityPolicy, "fcfs": FcfsPolicy}
