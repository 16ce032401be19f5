"""Block pool bookkeeping, prefix-cache hits and eviction, without a model."""
import random

import pytest

from autoglm.engine.sched.block_manager import BlockManager, hash_block
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sequence import Sequence
from tests.engine.sched.scheduling import compute, make_seq, run_batch


def test_hash_chains_parent_tokens_and_salt():
    base = hash_block(b"", [1, 2, 3, 4], b"")
    assert base == hash_block(b"", [1, 2, 3, 4], b"")
    assert base != hash_block(b"x", [1, 2, 3, 4], b"")
    assert base != hash_block(b"", [1, 2, 3, 5], b"")
    assert base != hash_block(b"", [1, 2, 3, 4], b"tenant-a")


def test_allocate_and_free_returns_every_block():
    manager = BlockManager(num_blocks=8, block_size=4)
    seq = make_seq(range(10))
    assert manager.allocate(seq, 10)
    assert len(seq.block_table) == 3 and manager.num_free_blocks == 5
    manager.free(seq)
    assert manager.num_free_blocks == 8 and manager.num_referenced_blocks() == 0
    manager.check_invariants()


def test_allocation_fails_without_change_when_pool_is_short():
    manager = BlockManager(num_blocks=2, block_size=4)
    seq = make_seq(range(12))
    assert not manager.allocate(seq, 12)
    assert seq.block_table == [] and manager.num_free_blocks == 2


def test_prefix_hit_reuses_full_blocks_and_leaves_one_token():
    manager = BlockManager(num_blocks=16, block_size=4)
    first = make_seq(range(12))
    assert manager.allocate(first, 12)
    compute(manager, first, 12)
    first_blocks = list(first.block_table)
    manager.free(first)
    # Same 12 tokens: only 2 blocks may hit, the last token must still be computed for logits.
    again = make_seq(range(12), request_id="again")
    hits = manager.find_cached_prefix(again)
    assert hits == first_blocks[:2]
    assert manager.allocate(again, 12 - 8, hits)
    assert again.num_computed_tokens == 8
    longer = make_seq(list(range(12)) + [99, 98], request_id="longer")
    assert len(manager.find_cached_prefix(longer)) == 3
    manager.check_invariants()


def test_salt_isolates_caches():
    manager = BlockManager(num_blocks=8, block_size=4, cache_salt=b"a")
    seq = make_seq(range(9))
    manager.allocate(seq, 9)
    compute(manager, seq, 9)
    other = BlockManager(num_blocks=8, block_size=4, cache_salt=b"b")
    assert other.find_cached_prefix(make_seq(range(9))) == []


def test_prompt_logprobs_requests_skip_the_cache():
    manager = BlockManager(num_blocks=8, block_size=4)
    seq = make_seq(range(9))
    manager.allocate(seq, 9)
    compute(manager, seq, 9)
    assert manager.find_cached_prefix(make_seq(range(9), prompt_logprobs=1)) == []


def test_least_recently_freed_cached_block_is_evicted_first():
    manager = BlockManager(num_blocks=4, block_size=2)
    old, new = make_seq([1, 2, 3]), make_seq([5, 6, 7])
    for seq in (old, new):
        manager.allocate(seq, 3)
        compute(manager, seq, 3)
        manager.free(seq)
    # Two fresh blocks: the two uncached (partial) ones go first, then the old prefix.
    filler = make_seq(range(100, 106))
    assert manager.allocate(filler, 6)
    assert manager.find_cached_prefix(make_seq([1, 2, 3])) == []
    assert len(manager.find_cached_prefix(make_seq([5, 6, 7]))) == 1


def test_contiguous_layout_reserves_a_whole_region():
    manager = BlockManager(num_blocks=8, block_size=4, reserve_tokens_per_seq=16)
    first, second, third = make_seq(range(3)), make_seq(range(3)), make_seq(range(3))
    assert manager.allocate(first, 3) and manager.allocate(second, 3)
    assert first.block_table == [0, 1, 2, 3] and second.block_table == [4, 5, 6, 7]
    assert not manager.allocate(third, 3)
    assert manager.allocate(first, 10)  # growth stays inside the region
    manager.free(first)
    assert manager.allocate(third, 3) and third.block_table == [0, 1, 2, 3]
    assert not manager.enable_prefix_caching


def test_random_schedule_with_aborts_and_preemptions_keeps_the_pool_whole():
    """Simulated engine steps over hundreds of requests; the model is replaced by bookkeeping."""
    rng = random.Random(0)
    manager = BlockManager(num_blocks=24, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=8, max_num_batched_tokens=32)
    live: list[Sequence] = []
    shared_prefix = [7] * 8
    for request in range(300):
        prompt = (shared_prefix if rng.random() < 0.5 else []) + [rng.randrange(50) for _ in range(rng.randrange(1, 20))]
        seq = make_seq(prompt, request_id=str(request), max_tokens=rng.randrange(1, 12), priority=rng.randrange(3),
                       arrival=float(request))
        scheduler.add(seq)
        live.append(seq)
        for _ in range(rng.randrange(0, 3)):
            for finished in run_batch(scheduler, scheduler.schedule(), next_token=rng.randrange(50)):
                live.remove(finished)
            manager.check_invariants()
        if live and rng.random() < 0.1:
            victim = live.pop(rng.randrange(len(live)))
            scheduler.finish(victim)
    while scheduler.num_unfinished:
        batch = scheduler.schedule()
        assert batch.seqs, "scheduler stalled with work left"
        run_batch(scheduler, batch)
    assert scheduler.num_preemptions > 0
    assert manager.num_referenced_blocks() == 0
    assert manager.num_free_blocks == manager.num_blocks
    manager.check_invariants()
    assert manager.prefix_cache_hits > 0


def test_preemption_takes_lowest_priority_latest_arrival():
    manager = BlockManager(num_blocks=4, block_size=2)
    scheduler = Scheduler(manager, max_num_seqs=4, max_num_batched_tokens=64)
    urgent = make_seq([1, 2, 3], request_id="urgent", priority=0, arrival=2.0)
    early = make_seq([4, 5, 6], request_id="early", priority=1, arrival=0.0)
    late = make_seq([7, 8, 9], request_id="late", priority=1, arrival=1.0)
    for seq in (late, early, urgent):
        scheduler.add(seq)
    batch = scheduler.schedule()
    assert [s.request_id for s in batch.seqs] == ["urgent", "early"]  # 2 blocks each, pool of 4
    for s, n in zip(batch.seqs, batch.num_new_tokens):
        compute(manager, s, n)
        s.token_ids.append(0)
    # Each needs a third block for its 5th token: the pool is full, so "early" is preempted.
    for s in (urgent, early):
        s.token_ids.append(0)
        s.num_computed_tokens += 1
    batch = scheduler.schedule()
    assert [s.request_id for s in batch.preempted] == ["early"]
    assert scheduler.waiting[0].request_id == "early"
    assert early.num_computed_tokens == 0 and early.block_table == []


@pytest.mark.parametrize("chunked", [True, False])
def test_token_budget_and_chunking(chunked):
    manager = BlockManager(num_blocks=64, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=8, max_num_batched_tokens=10, enable_chunked_prefill=chunked)
    long, short = make_seq(range(25), request_id="long", arrival=0), make_seq(range(5), request_id="short", arrival=1)
    scheduler.add(long)
    scheduler.add(short)
    batch = scheduler.schedule()
    if chunked:
        assert batch.num_new_tokens == [10] and batch.seqs == [long]
    else:
        assert batch.seqs == []  # a 25-token prompt never fits a 10-token step


def test_a_prompt_waits_for_a_shared_prefix_being_computed_instead_of_recomputing_it():
    manager = BlockManager(num_blocks=64, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=8, max_num_batched_tokens=64)
    prefix = list(range(100, 112))  # three full blocks
    first, second = make_seq(prefix + [1, 2], request_id="a", arrival=0), make_seq(prefix + [3, 4], request_id="b", arrival=1)
    other = make_seq(range(50, 60), request_id="c", arrival=2)
    for seq in (first, second, other):
        scheduler.add(seq)
    batch = scheduler.schedule()
    assert batch.seqs == [first, other]  # b would compute a's blocks again: it waits, c does not
    for seq, num_new in zip(batch.seqs, batch.num_new_tokens):
        compute(manager, seq, num_new)
    batch = scheduler.schedule()
    assert second in batch.seqs and second.num_cached_tokens == 12
    assert batch.num_new_tokens[batch.seqs.index(second)] == 2


def test_an_aborted_prefix_owner_no_longer_holds_others_back():
    manager = BlockManager(num_blocks=64, block_size=4)
    scheduler = Scheduler(manager, max_num_seqs=8, max_num_batched_tokens=8)
    prefix = list(range(100, 112))
    owner, follower = make_seq(prefix + [1], request_id="a", arrival=0), make_seq(prefix + [2], request_id="b", arrival=1)
    scheduler.add(owner)
    scheduler.add(follower)
    assert scheduler.schedule().seqs == [owner]  # a chunk of 8: a's blocks are still in flight
    scheduler.finish(owner)
    assert scheduler.schedule().seqs == [follower]


def test_a_forked_completion_takes_the_prompt_blocks_of_its_parent_without_the_cache():
    manager = BlockManager(num_blocks=16, block_size=4, enable_prefix_caching=False)
    parent = make_seq(range(11))
    assert manager.allocate(parent, 11)
    compute(manager, parent, 11)
    child = make_seq(range(11), parent=parent)
    assert manager.find_cached_prefix(child) == parent.block_table[:2]  # 10 tokens: 2 full blocks, 1 left over
    manager.free(parent)
    assert manager.find_cached_prefix(child) == []


def test_only_the_first_completion_scores_the_prompt():
    parent = make_seq(range(9), prompt_logprobs=1)
    child = make_seq(range(9), prompt_logprobs=1, parent=parent)
    assert parent.needs_prompt_logprobs and not child.needs_prompt_logprobs
