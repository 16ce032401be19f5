"""Scheduling policy without a model: step budget order, progress, and aging."""
from __future__ import annotations

from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sched.policies import PriorityPolicy
from tests.engine.sched.scheduling import make_seq, run_batch


def test_decodes_take_the_budget_before_a_prompt_that_sorts_earlier():
    manager = BlockManager(num_blocks=64, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=8, max_num_batched_tokens=8)
    streams = [make_seq([10 + i, 20 + i], request_id=f"s{i}", max_tokens=40, priority=5, arrival=i) for i in range(3)]
    for seq in streams:
        scheduler.add(seq)
    run_batch(scheduler, scheduler.schedule())  # three short prompts read: all three now decode
    urgent = make_seq(range(100, 140), request_id="urgent", priority=0, arrival=9)
    scheduler.add(urgent)
    steps_reading = 0
    while urgent.num_computed_tokens < urgent.num_prompt_tokens:
        batch = scheduler.schedule()
        scheduled = dict(zip(batch.seqs, batch.num_new_tokens))
        assert all(scheduled.get(seq) == 1 for seq in streams), "a running decode waited while a prompt was read"
        assert scheduled[urgent] == 8 - len(streams)
        run_batch(scheduler, batch)
        steps_reading += 1
    assert steps_reading == 8  # 40 prompt tokens, 5 a step


def test_aging_lets_a_low_priority_request_past_a_stream_of_urgent_ones():
    """One slot, and every step a new urgent request: the low-priority one still runs, after
    its priority has aged by the difference (3 levels of 10 steps)."""
    manager = BlockManager(num_blocks=64, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=1, max_num_batched_tokens=64,
                          policy=PriorityPolicy(aging_steps=10))
    patient = make_seq([1, 2, 3], request_id="patient", max_tokens=1, priority=3)
    scheduler.add(patient)
    for step in range(60):
        scheduler.add(make_seq([4, 5, 6], request_id=f"urgent{step}", max_tokens=1, priority=0, arrival=step + 1))
        batch = scheduler.schedule()
        run_batch(scheduler, batch)
        if patient in batch.seqs:
            break
    assert patient.is_finished
    assert step == 30  # its 3 + 0/10 ties the urgent one queued at step 30 (3 + 30/10), and arrived first


def test_a_decode_preempted_for_an_earlier_prompt_chunk_leaves_the_step():
    manager = BlockManager(num_blocks=2, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=4, max_num_batched_tokens=4)
    stream = make_seq([1, 2], request_id="stream", max_tokens=4, priority=1)
    scheduler.add(stream)
    run_batch(scheduler, scheduler.schedule())
    urgent = make_seq(range(10, 22), request_id="urgent", priority=0, arrival=1)
    scheduler.add(urgent)
    run_batch(scheduler, scheduler.schedule())  # the stream decodes; the prompt's first chunk takes the last block
    batch = scheduler.schedule()  # the prompt's next chunk needs a block: the stream, already scheduled, gives its own
    assert batch.seqs == [urgent] and batch.preempted == [stream]
    assert stream.block_table == [] and scheduler.waiting == [stream]
    manager.check_invariants()


def test_a_request_not_admitted_now_waits_unless_it_is_the_one_run_alone():
    manager = BlockManager(num_blocks=16, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=8, max_num_batched_tokens=64)
    scheduler.admits_request = lambda request_id: request_id == "begun"
    for request_id in ("begun", "new", "alone"):
        scheduler.add(make_seq(range(1, 5), request_id=request_id))
    assert [seq.request_id for seq in scheduler.schedule().seqs] == ["begun"]
    scheduler.isolated_request = "alone"  # a failed step's suspect, run alone, must not wait behind the switch
    assert [seq.request_id for seq in scheduler.schedule().seqs] == ["alone"]
