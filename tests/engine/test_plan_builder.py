"""The engine's step plan: rows, tokens, KV slots, block tables and varlen boundaries, as plain data."""
from __future__ import annotations

import pickle

import torch

from autoglm.engine.plan_builder import build_step_plan
from autoglm.engine.sequence import Sequence
from autoglm.sampling_params import SamplingParams

BLOCK_SIZE = 4
EOS = 2


def sequence(token_ids, num_computed, block_table, num_prompt=None, **params) -> Sequence:
    seq = Sequence(request_id="r", index=0, token_ids=list(token_ids), num_prompt_tokens=num_prompt or len(token_ids),
                   params=SamplingParams(**params), max_tokens=16, arrival_time=0.0, seed=params.get("seed") or 0)
    seq.num_computed_tokens = num_computed
    seq.block_table = list(block_table)
    return seq


def mixed_batch():
    """A fresh prompt, a decode, a prompt after a 4-token cached prefix (scoring its prompt), and a row
    carrying three query tokens at the end of its context, scheduled in that order."""
    fresh = sequence(range(10, 16), 0, [7, 8])
    decode = sequence(range(20, 27), 6, [3, 5], num_prompt=5, seed=11, min_tokens=5, stop_token_ids=[9])
    cached = sequence(range(30, 39), 4, [1, 2, 6], prompt_logprobs=2)
    several = sequence(range(40, 50), 7, [9, 10, 11], num_prompt=6, logprobs=3)
    return [fresh, decode, cached, several], [6, 1, 3, 3]


def test_rows_put_single_token_queries_first_with_their_varlen_boundaries():
    (fresh, decode, cached, several), num_new = mixed_batch()
    plan = build_step_plan([fresh, decode, cached, several], num_new, BLOCK_SIZE, {EOS}).plan
    assert plan.query_lens == [1, 6, 3, 3]
    assert plan.seq_lens == [7, 6, 7, 10]
    assert plan.cu_seqlens_q() == [0, 1, 7, 10, 13]
    assert plan.num_decode_tokens == 1
    assert plan.row_ids == [seq.seq_id for seq in (decode, fresh, cached, several)]
    assert plan.input_ids.tolist() == [26, *range(10, 16), 34, 35, 36, 47, 48, 49]
    assert plan.positions.tolist() == [6, *range(6), 4, 5, 6, 7, 8, 9]
    assert plan.block_tables.tolist() == [[3, 5, 0], [7, 8, 0], [1, 2, 6], [9, 10, 11]]
    expected_slots = [5 * 4 + 2, *(7 * 4 + i for i in range(4)), 8 * 4, 8 * 4 + 1, 2 * 4, 2 * 4 + 1, 2 * 4 + 2,
                      10 * 4 + 3, 11 * 4, 11 * 4 + 1]
    assert plan.slot_mapping.tolist() == expected_slots


def test_sampled_rows_and_scored_prompt_positions_are_plain_settings():
    planned = build_step_plan(*mixed_batch(), BLOCK_SIZE, {EOS})
    plan = planned.plan
    decode, fresh, _, several = planned.seqs[0], planned.seqs[1], planned.seqs[2], planned.seqs[3]
    # The cached-prefix row ends mid-prompt: it is scored, not sampled.
    assert planned.sampled_seqs == [decode, fresh, several]
    assert plan.sample_tokens == [0, 6, 12]
    decode_row, fresh_row, several_row = plan.sampling
    assert decode_row.seed == 11 and decode_row.draw_index == 2
    assert decode_row.banned_token_ids == (EOS, 9)  # two of five min_tokens so far
    assert fresh_row.banned_token_ids == () and fresh_row.seed == fresh.seed and fresh_row.num_logprobs is None
    assert several_row.num_logprobs == 3
    (scoring,) = plan.prompt_scoring
    assert (scoring.first_token, scoring.target_token_ids, scoring.num_top) == (7, [35, 36, 37], 2)


def test_the_plan_survives_pickling():
    plan = build_step_plan(*mixed_batch(), BLOCK_SIZE, {EOS}).plan
    copy = pickle.loads(pickle.dumps(plan))
    for name, value in vars(plan).items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(getattr(copy, name), value), name
        else:
            assert getattr(copy, name) == value, name
