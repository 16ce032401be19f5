"""Lookahead slots and their roll-back keep the block pool whole and the prefix cache honest."""
import random

from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.speculative.proposer import max_lookahead
from autoglm.sampling_params import SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams
from tests.engine.sched.scheduling import make_seq

BLOCK_SIZE = 4
MAX_TOKENS = 40


def test_random_accepts_and_rejects_leave_no_block_behind():
    """Sequences decode with random lookahead and random acceptance; every K/V slot remembers the token written
    there (a rejected proposal writes a wrong one). A block the prefix cache offers must hold its tokens."""
    rng = random.Random(0)
    manager = BlockManager(num_blocks=48, block_size=BLOCK_SIZE)
    scheduler = Scheduler(manager, max_num_seqs=4, max_num_batched_tokens=64,
                          lookahead=lambda seq: max_lookahead(seq, 5, 10_000))
    slots: dict[int, int] = {}  # KV slot -> token written there
    prompts = [[rng.randrange(3) for _ in range(rng.randrange(3, 14))] for _ in range(10)]
    for index, prompt in enumerate(prompts):
        scheduler.add(make_seq(prompt, request_id=f"r{index}", max_tokens=MAX_TOKENS))
    saw_lookahead = saw_rejection = False
    while scheduler.num_unfinished:
        batch = scheduler.schedule()
        for seq, num_new, lookahead in zip(batch.seqs, batch.num_new_tokens, batch.num_lookahead_tokens):
            start = seq.num_computed_tokens
            assert len(seq.block_table) * BLOCK_SIZE >= start + num_new + lookahead
            next_tokens = [rng.randrange(3) for _ in range(lookahead + 1)]
            accepted = rng.randrange(lookahead + 1)
            written = seq.token_ids[start : start + num_new] + next_tokens[:accepted] + [7] * (lookahead - accepted)
            for position, token in enumerate(written, start):
                slots[seq.block_table[position // BLOCK_SIZE] * BLOCK_SIZE + position % BLOCK_SIZE] = token
            saw_lookahead |= lookahead > 0
            saw_rejection |= accepted < lookahead
            seq.num_computed_tokens += num_new
            if seq.num_computed_tokens < seq.num_tokens:
                manager.cache_full_blocks(seq)
                continue
            seq.token_ids.extend(next_tokens[: accepted + 1])
            seq.num_computed_tokens += accepted
            manager.cache_full_blocks(seq)
            manager.release_lookahead(seq)
            assert len(seq.block_table) == manager.blocks_for(seq.num_computed_tokens)
            if seq.num_output_tokens >= seq.max_tokens:
                scheduler.finish(seq)
            manager.check_invariants()
            _check_cached_blocks_hold_their_tokens(manager, seq.token_ids, slots)
    assert saw_lookahead and saw_rejection
    assert manager.num_referenced_blocks() == 0 and manager.num_free_blocks == manager.num_blocks


def _check_cached_blocks_hold_their_tokens(manager, token_ids, slots):
    probe = make_seq(token_ids + [0], request_id="probe")
    for index, block_id in enumerate(manager.find_cached_prefix(probe)):
        held = [slots.get(block_id * BLOCK_SIZE + offset) for offset in range(BLOCK_SIZE)]
        assert held == token_ids[index * BLOCK_SIZE : (index + 1) * BLOCK_SIZE], f"cached block {block_id}"


def test_lookahead_is_taken_only_where_blocks_are_free():
    manager = BlockManager(num_blocks=2, block_size=BLOCK_SIZE)
    scheduler = Scheduler(manager, max_num_seqs=2, max_num_batched_tokens=64, lookahead=lambda seq: 4)
    seq = make_seq(range(7), max_tokens=MAX_TOKENS)
    scheduler.add(seq)
    scheduler.schedule()
    seq.num_computed_tokens = 7
    seq.token_ids.append(1)
    batch = scheduler.schedule()  # 8 tokens + 4 lookahead would need a third block
    assert batch.num_lookahead_tokens == [0] and batch.num_new_tokens == [1]
    assert scheduler.num_preemptions == 0


def test_no_lookahead_for_constrained_requests_or_past_max_tokens():
    seq = make_seq(range(5), max_tokens=3)
    assert max_lookahead(seq, 4, 100) == 2  # 3 new tokens at most: 2 proposals and the target's own
    assert max_lookahead(seq, 4, 6) == 0  # the context holds one more token only
    seq.params = SamplingParams(max_tokens=3, structured_outputs=StructuredOutputsParams(regex="[ab]+"))
    assert max_lookahead(seq, 4, 100) == 0
