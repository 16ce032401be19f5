"""The scheduler asks its policy for every order it uses, and the setting picks the policy."""
from __future__ import annotations

from collections import Counter

import pytest

from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sched.policies import FcfsPolicy, PriorityPolicy, SchedulerPolicy
from autoglm.engine.sequence import Sequence
from autoglm.errors import InvalidRequestError
from autoglm.sampling_params import SamplingParams
from tests.engine.sched.scheduling import make_seq, run_batch
from tests.engine.scripted_engine import scripted_engine


class NewestFirstPolicy(SchedulerPolicy):
    """The reverse of first come, first served."""

    def queue_key(self, seq: Sequence, step: int) -> tuple[float, int]:
        return -seq.arrival_time, -seq.seq_id


class TenantFairSharePolicy(SchedulerPolicy):
    """A toy per-tenant fair share: the tenant (the request id up to ':') served fewest tokens first."""

    def __init__(self) -> None:
        self.tokens_served: Counter[str] = Counter()

    @staticmethod
    def tenant(seq: Sequence) -> str:
        return seq.request_id.split(":")[0]

    def queue_key(self, seq: Sequence, step: int) -> tuple[int, float, int]:
        return self.tokens_served[self.tenant(seq)], seq.arrival_time, seq.seq_id

    def step_scheduled(self, batch: ScheduledBatch) -> None:
        for seq, num_new in zip(batch.seqs, batch.num_new_tokens):
            self.tokens_served[self.tenant(seq)] += num_new


def finishing_order(scheduler: Scheduler, seqs: list[Sequence]) -> list[str]:
    for seq in seqs:
        scheduler.add(seq)
    order = []
    for _ in range(100):  # far more steps than the work needs: only a stuck scheduler runs out
        order += [seq.request_id for seq in run_batch(scheduler, scheduler.schedule())]
        if not scheduler.num_unfinished:
            return order
    raise AssertionError("the scheduler stopped making progress")


def one_at_a_time(policy: SchedulerPolicy) -> Scheduler:
    return Scheduler(BlockManager(num_blocks=64, block_size=4), max_num_seqs=1, max_num_batched_tokens=64,
                     policy=policy)


def test_priority_policy_runs_lower_priority_values_first_and_fcfs_ignores_them():
    def requests() -> list[Sequence]:
        return [make_seq([1, 2], request_id=name, max_tokens=1, priority=priority, arrival=arrival)
                for arrival, (name, priority) in enumerate([("a", 2), ("b", 0), ("c", 1), ("d", 0)])]

    assert finishing_order(one_at_a_time(PriorityPolicy()), requests()) == ["b", "d", "c", "a"]
    assert finishing_order(one_at_a_time(FcfsPolicy()), requests()) == ["a", "b", "c", "d"]


def test_the_scheduler_admits_budgets_and_preempts_in_the_order_its_policy_gives():
    seqs = [make_seq([1, 2, 3, 4], request_id=f"r{i}", max_tokens=1, arrival=i) for i in range(4)]
    assert finishing_order(one_at_a_time(NewestFirstPolicy()), seqs) == ["r3", "r2", "r1", "r0"]

    manager = BlockManager(num_blocks=2, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=4, max_num_batched_tokens=3, policy=NewestFirstPolicy())
    old, new = (make_seq(range(10, 13), request_id=name, max_tokens=4, arrival=arrival)
                for arrival, name in enumerate(["old", "new"]))
    scheduler.add(old)
    run_batch(scheduler, scheduler.schedule())  # "old" reads its prompt and takes a block
    scheduler.add(new)
    batch = scheduler.schedule()  # after the running decode, "new" reads 2 of its 3 prompt tokens into the last block
    assert batch.seqs == [old, new] and batch.num_new_tokens == [1, 2]
    run_batch(scheduler, batch)
    # "new" goes first and fits its block; "old" needs a second one and none is free. The victim
    # is the last in this policy's order, "old" itself (the default order would take "new").
    batch = scheduler.schedule()
    assert batch.preempted == [old] and batch.seqs == [new]
    manager.check_invariants()


def test_a_fair_share_policy_plugs_in_and_alternates_tenants():
    """Tenant a queues four requests before tenant b queues two: b's run between a's, not after them."""
    seqs = [make_seq([1, 2], request_id=f"a:{i}", max_tokens=1, arrival=i) for i in range(4)]
    seqs += [make_seq([1, 2], request_id=f"b:{i}", max_tokens=1, arrival=10 + i) for i in range(2)]
    order = finishing_order(one_at_a_time(TenantFairSharePolicy()), seqs)
    assert order == ["a:0", "b:0", "a:1", "b:1", "a:2", "a:3"]


def test_the_scheduling_policy_setting_reaches_the_scheduler():
    def first_finished(**settings) -> str:
        engine = scripted_engine(num_blocks=64, max_num_seqs=1, **settings)
        params = SamplingParams(max_tokens=1)
        engine.add_request("low", [3, 4, 5], params, priority=5)
        engine.add_request("high", [3, 4, 6], params, priority=0)
        return next(output.request_id for output in engine.step() if output.finished)

    assert first_finished() == "high"
    assert first_finished(scheduling_policy="fcfs") == "low"


def test_the_max_abs_priority_setting_bounds_request_priorities():
    engine = scripted_engine(num_blocks=64, max_abs_priority=5)
    params = SamplingParams(max_tokens=1)
    engine.add_request("lowest", [3, 4, 5], params, priority=5)
    engine.add_request("highest", [3, 4, 6], params, priority=-5)
    for priority in (6, -6):
        with pytest.raises(InvalidRequestError, match=r"priority must be in \[-5, 5\]") as caught:
            engine.add_request("beyond", [3, 4, 7], params, priority=priority)
        assert caught.value.param == "priority"
    assert sorted(engine.requests) == ["highest", "lowest"]
