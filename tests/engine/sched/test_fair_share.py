"""Fair share between tenants, counted in scheduler steps and tokens, never in time: a tenant
behind a flood goes first, weights split the tokens served, idleness banks no credit, a
per-tenant cap holds, the tenant furthest ahead is preempted, and without tenants nothing changes."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.sched.fair_share import FairSharePolicy, tenant_id
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sched.policies import FcfsPolicy, PriorityPolicy, SchedulerPolicy
from autoglm.engine.sequence import Sequence, TenantTag
from autoglm.errors import InvalidRequestError
from autoglm.sampling_params import SamplingParams
from tests.engine.sched.scheduling import make_seq, run_batch
from tests.engine.scripted_engine import scripted_engine

MAX_STEPS = 5000  # far more than any test's work needs: only a stuck scheduler reaches it


def record_batches(engine: LLMEngine) -> list[ScheduledBatch]:
    """Every batch the engine's scheduler returns from now on, in step order."""
    batches: list[ScheduledBatch] = []
    schedule = engine.scheduler.schedule

    def recording_schedule() -> ScheduledBatch:
        batches.append(schedule())
        return batches[-1]

    engine.scheduler.schedule = recording_schedule
    return batches


def admission_order(batches: list[ScheduledBatch]) -> list[str]:
    """Request ids in the order they were first scheduled (within a step, in batch order)."""
    order: dict[str, None] = {}
    for batch in batches:
        order.update(dict.fromkeys(seq.request_id for seq in batch.seqs))
    return list(order)


def test_a_tenant_behind_a_flood_is_admitted_before_the_flood_and_finishes_while_it_waits():
    engine = scripted_engine(num_blocks=512, max_num_seqs=8)
    flood, light = TenantTag("a"), TenantTag("b")
    for i in range(64):
        engine.add_request(f"a{i}", [3, 4, 5, 6 + i], SamplingParams(max_tokens=24 + i % 7), tenant=flood)
    batches = record_batches(engine)
    for _ in range(5):
        engine.step()
    waiting_at_arrival = {seq.request_id for seq in engine.scheduler.waiting}
    assert len(waiting_at_arrival) == 56
    light_ids = [f"b{i}" for i in range(4)]
    for request_id in light_ids:
        engine.add_request(request_id, [7, 8, 9, 10], SamplingParams(max_tokens=4), tenant=light)
    finished_at_step: dict[str, int] = {}
    while engine.has_unfinished_requests() and len(batches) < MAX_STEPS:
        finished_at_step.update((out.request_id, len(batches)) for out in engine.step() if out.finished)

    order = admission_order(batches)
    assert max(map(order.index, light_ids)) < min(map(order.index, waiting_at_arrival))
    last_flood_admission = next(step for step, batch in enumerate(batches, start=1)
                                if order[-1] in (seq.request_id for seq in batch.seqs))
    assert max(finished_at_step[request_id] for request_id in light_ids) < last_flood_admission


def backlogged_service(scheduler: Scheduler, seqs: list[Sequence]) -> Counter[str]:
    """Tokens served to each tenant in the steps that start with every tenant still waiting for a slot."""
    tenants = {tenant_id(seq) for seq in seqs}
    for seq in seqs:
        scheduler.add(seq)
    served: Counter[str] = Counter()
    while {tenant_id(seq) for seq in scheduler.waiting} == tenants:
        batch = scheduler.schedule()
        for seq, num_new in zip(batch.seqs, batch.num_new_tokens):
            served[tenant_id(seq)] += num_new
        run_batch(scheduler, batch)
    return served


@pytest.mark.parametrize("varied", [True, False], ids=["varied-requests", "identical-requests"])
def test_weights_three_to_one_split_the_tokens_served_three_to_one(varied):
    """Identical requests finish together, freeing several slots in one step: each admission is
    charged at once, so those slots are shared by weight too."""
    heavy, light = TenantTag("heavy", weight=3.0), TenantTag("light", weight=1.0)
    seqs = [make_seq([10 + i % 40] * (4 + i % 5 if varied else 6), request_id=f"{tenant.id}{i}",
                     max_tokens=12 + i % 7 if varied else 16, arrival=i, tenant=tenant)
            for i in range(80) for tenant in (heavy, light)]
    scheduler = Scheduler(BlockManager(num_blocks=1024, block_size=4), max_num_seqs=8, max_num_batched_tokens=64)
    served = backlogged_service(scheduler, seqs)
    assert sum(served.values()) > 1000  # long enough to measure a share
    assert served["heavy"] / served["light"] == pytest.approx(3.0, rel=0.1)


def finishing_order(scheduler: Scheduler, max_steps: int = MAX_STEPS) -> list[str]:
    """Request ids in the order they finish, over ``max_steps`` steps or until none is left."""
    order: list[str] = []
    for _ in range(max_steps):
        if not scheduler.num_unfinished:
            return order
        order += [seq.request_id for seq in run_batch(scheduler, scheduler.schedule())]
    return order


def test_a_tenant_back_from_idle_shares_from_then_on_instead_of_spending_banked_credit():
    """One slot, one step a request. b is served once, then idles while a is served twenty times:
    on its return the two alternate, rather than b taking five turns in a row on its old account."""
    a, b = TenantTag("a"), TenantTag("b")
    scheduler = Scheduler(BlockManager(num_blocks=64, block_size=4), max_num_seqs=1, max_num_batched_tokens=64)
    scheduler.add(make_seq([1, 2], request_id="b-early", max_tokens=1, tenant=b))
    for i in range(30):
        scheduler.add(make_seq([1, 2], request_id=f"a{i}", max_tokens=1, arrival=1 + i, tenant=a))
    assert finishing_order(scheduler, max_steps=21) == ["b-early", *(f"a{i}" for i in range(20))]
    for i in range(5):
        scheduler.add(make_seq([1, 2], request_id=f"b{i}", max_tokens=1, arrival=100 + i, tenant=b))
    assert finishing_order(scheduler)[:10] == ["b0", "a20", "b1", "a21", "b2", "a22", "b3", "a23", "b4", "a24"]


def test_the_tenant_cap_keeps_one_tenant_from_holding_every_slot():
    engine = scripted_engine(num_blocks=512, max_num_seqs=8, max_num_seqs_per_tenant=5)
    for i in range(20):
        engine.add_request(f"a{i}", [3, 4, 5 + i], SamplingParams(max_tokens=6), tenant=TenantTag("a"))

    def running() -> Counter[str | None]:
        return Counter(tenant_id(seq) for seq in engine.scheduler.running)

    engine.step()
    assert running() == {"a": 5}  # three slots stay free: a's other fifteen wait
    for i in range(10):
        engine.add_request(f"b{i}", [6, 7, 8 + i], SamplingParams(max_tokens=6), tenant=TenantTag("b"))
    engine.step()
    assert running() == {"a": 5, "b": 3}
    while engine.has_unfinished_requests():
        engine.step()
        assert all(count <= 5 for count in running().values())


def test_requests_without_a_tenant_are_never_capped():
    engine = scripted_engine(num_blocks=512, max_num_seqs=8, max_num_seqs_per_tenant=2)
    for i in range(10):
        engine.add_request(f"r{i}", [3, 4, 5 + i], SamplingParams(max_tokens=6))
    engine.step()
    assert len(engine.scheduler.running) == 8


def test_preemption_takes_the_tenant_furthest_ahead():
    """a has been served longer, so it gives up its blocks although it came first; the
    priority policy alone would preempt b, the later arrival."""
    def run(policy: SchedulerPolicy) -> list[str]:
        scheduler = Scheduler(BlockManager(num_blocks=6, block_size=4), max_num_seqs=4, max_num_batched_tokens=8,
                              policy=policy)
        scheduler.add(make_seq([1, 2, 3, 4], request_id="a", max_tokens=20, tenant=TenantTag("a")))
        for _ in range(8):  # a is served 11 tokens, and holds 3 blocks
            run_batch(scheduler, scheduler.schedule())
        scheduler.add(make_seq([5], request_id="b", max_tokens=20, arrival=1, tenant=TenantTag("b")))
        for _ in range(MAX_STEPS):
            batch = scheduler.schedule()
            if batch.preempted:
                scheduler.block_manager.check_invariants()
                return [seq.request_id for seq in batch.preempted]
            run_batch(scheduler, batch)
        raise AssertionError("the pool never ran out")

    assert run(FairSharePolicy(PriorityPolicy())) == ["a"]
    assert run(PriorityPolicy()) == ["b"]


def trace(scheduler: Scheduler, requests: list[Callable[[], Sequence]]) -> list[tuple[object, ...]]:
    """Each step's (request id, tokens) pairs and preemptions, one new request queued per step."""
    steps = []
    pending = list(requests)
    for _ in range(MAX_STEPS):
        if pending:
            scheduler.add(pending.pop(0)())
        elif not scheduler.num_unfinished:
            return steps
        batch = scheduler.schedule()
        steps.append((list(zip((seq.request_id for seq in batch.seqs), batch.num_new_tokens)),
                      [seq.request_id for seq in batch.preempted]))
        run_batch(scheduler, batch)
    raise AssertionError("the scheduler stopped making progress")


@pytest.mark.parametrize("within", [lambda: PriorityPolicy(aging_steps=5), FcfsPolicy], ids=["priority", "fcfs"])
@pytest.mark.parametrize("tenant", [None, TenantTag("only", weight=2.5)], ids=["no-tenant", "one-tenant"])
def test_with_no_tenant_or_one_the_order_is_exactly_the_within_policys(within, tenant):
    def request(i: int) -> Callable[[], Sequence]:
        return lambda: make_seq([1 + i % 3] * (3 + i % 7), request_id=f"r{i}", max_tokens=3 + i % 8,
                                priority=i % 3 - 1, arrival=i, tenant=tenant)

    def scheduler(policy: SchedulerPolicy) -> Scheduler:  # small enough a pool to preempt
        return Scheduler(BlockManager(num_blocks=12, block_size=4), max_num_seqs=4, max_num_batched_tokens=8,
                         policy=policy)

    requests = [request(i) for i in range(24)]
    alone = trace(scheduler(within()), requests)
    assert trace(scheduler(FairSharePolicy(within())), requests) == alone
    assert any(preempted for _, preempted in alone)


def test_a_tenant_weight_must_be_finite_and_positive():
    for weight in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(InvalidRequestError, match="weight must be a finite number above 0"):
            TenantTag("a", weight=weight)
