"""Weighted fair share between tenants: start-time fair queuing over the tokens each is served."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sched.policies import SchedulerPolicy
from autoglm.engine.sequence import Sequence


def tenant_id(seq: Sequence) -> str | None:
    """The tenant ``seq`` is served for; None, the implicit tenant, when its request named none."""
    return None if seq.tenant is None else seq.tenant.id


def tenant_weight(seq: Sequence) -> float:
    return 1.0 if seq.tenant is None else seq.tenant.weight


class FairSharePolicy(SchedulerPolicy):
    """The least-served tenant, for its weight, goes first; inside a tenant, the order of ``within``.

    A tenant's virtual time is the tokens computed for it (prompt and generated alike; prefix-cache
    hits cost nothing) divided by its weight. Under speculative decoding a step hands a sequence the
    proposals it kept as well as its next token: those are charged too, when delivered, so a tenant
    whose text the proposer guesses well gets its weight's share of tokens, not of steps. Sequences sort on their tenant's virtual time first,
    so whenever a slot or budget is free it goes to the tenant furthest behind, and while several
    tenants have work each is served in proportion to its weight, however many requests it queues.
    Preemption takes the last in that order: the tenant furthest ahead gives up its blocks first.

    A tenant with nothing queued or running is idle. When it queues again its virtual time is
    raised to the engine's: the least virtual time, before the step, of the tenants the latest
    step served (the start tag of start-time fair queuing). So idleness banks no credit: a
    returning tenant's virtual time trails theirs by at most one step's service, enough that it
    goes before their queued work, never enough to shut them out.
    """

    def __init__(self, within: SchedulerPolicy) -> None:
        self.within = within
        self.engine_virtual_time = 0.0
        self._virtual_time: dict[str | None, float] = {}  # tenants with work, and idle ones ahead of the engine
        self._unfinished: defaultdict[str | None, set[int]] = defaultdict(set)  # seq_ids by tenant
        # Admissions of the step being chosen, charged until step_scheduled counts the whole batch.
        self._admitting: defaultdict[str | None, float] = defaultdict(float)

    def virtual_time(self, tenant: str | None) -> float:
        """Tokens served to ``tenant`` per unit of weight, on the engine's clock."""
        return self._virtual_time.get(tenant, self.engine_virtual_time) + self._admitting.get(tenant, 0.0)

    def queue_key(self, seq: Sequence, step: int) -> tuple[Any, ...]:
        return self.virtual_time(tenant_id(seq)), *self.within.queue_key(seq, step)

    def sequence_admitted(self, seq: Sequence, num_new_tokens: int) -> None:
        """Charge the admission at once: when several slots free up in one step (identical requests
        finishing together) they go to tenants in proportion to their weights, not all to the one
        that was furthest behind when the step began."""
        self._admitting[tenant_id(seq)] += num_new_tokens / tenant_weight(seq)
        self.within.sequence_admitted(seq, num_new_tokens)

    def step_scheduled(self, batch: ScheduledBatch) -> None:
        self._admitting.clear()  # the batch holds those admissions: counted below with the rest
        served: defaultdict[str | None, float] = defaultdict(float)
        for seq, num_new in zip(batch.seqs, batch.num_new_tokens):
            served[tenant_id(seq)] += num_new / tenant_weight(seq)
        if served:
            start = min(self.virtual_time(tenant) for tenant in served)
            self.engine_virtual_time = max(self.engine_virtual_time, start)
        for tenant, service in served.items():
            self._virtual_time[tenant] = self.virtual_time(tenant) + service
        self.within.step_scheduled(batch)

    def charge_kept_proposals(self, seq: Sequence, num_kept: int) -> None:
        """Charge the proposals a step kept for ``seq`` (its next token was charged when scheduled)."""
        if num_kept <= 0:
            return
        tenant = tenant_id(seq)
        self._virtual_time[tenant] = self.virtual_time(tenant) + num_kept / tenant_weight(seq)
        if tenant not in self._unfinished and self._virtual_time[tenant] <= self.engine_virtual_time:
            del self._virtual_time[tenant]  # it went idle in this step: as sequence_finished forgets it

    def sequence_queued(self, seq: Sequence) -> None:
        tenant = tenant_id(seq)
        unfinished = self._unfinished[tenant]
        if not unfinished:  # back from idle: level with the engine unless still ahead of it
            self._virtual_time[tenant] = max(self.virtual_time(tenant), self.engine_virtual_time)
        unfinished.add(seq.seq_id)
        self.within.sequence_queued(seq)

    def sequence_finished(self, seq: Sequence) -> None:
        tenant = tenant_id(seq)
        unfinished = self._unfinished.get(tenant)
        if unfinished is not None and seq.seq_id in unfinished:
            unfinished.remove(seq.seq_id)
            if not unfinished:  # idle: forget it unless it is ahead, which it stays on return
                del self._unfinished[tenant]
                if self._virtual_time[tenant] <= self.engine_virtual_time:
                    del self._virtual_time[tenant]
        self.within.sequence_finished(seq)
