"""A draft model: a smaller checkpoint of the same tokenizer proposes by decoding a few tokens itself.

Its KV pool has as many blocks as the target's and is addressed through the target's block
tables, so the scheduler's lookahead slots serve both models and no second block manager is
needed. The draft samples each proposal with the draw plain decoding of the target would make at
that position (the sequence's seed and output index): where both models' draws agree the target
keeps the proposal, so sampled requests are sped up too and their outputs stay unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.engine.plan_builder import build_step_plan
from autoglm.engine.sequence import Sequence
from autoglm.engine.speculative.verify import common_prefix_length
from autoglm.runner.model_runner import ModelRunner


@dataclass
class _DraftKV:
    """The tokens whose K/V the draft pool holds for one sequence, from position 0."""

    token_ids: list[int]
    num_preemptions: int  # a preemption gave the sequence other blocks: what the pool held is gone


class DraftModelProposer:
    """Decodes ``max_lengths[i]`` tokens of each sequence with the draft, all sequences batched per round."""

    def __init__(self, runner: ModelRunner, block_size: int, eos_token_ids: set[int]) -> None:
        self.runner = runner
        self.block_size = block_size
        self.eos_token_ids = eos_token_ids
        self._kv: dict[int, _DraftKV] = {}  # by seq_id, for the sequences proposed for last time

    def propose(self, seqs: list[Sequence], max_lengths: list[int]) -> list[list[int]]:
        shadows = [self._shadow(seq) for seq in seqs]
        proposals: list[list[int]] = [[] for _ in seqs]
        active = [i for i, length in enumerate(max_lengths) if length > 0]
        while active:
            rows = [shadows[i] for i in active]
            planned = build_step_plan(rows, [row.num_tokens - row.num_computed_tokens for row in rows],
                                      self.block_size, self.eos_token_ids)
            drawn = dict(zip(planned.sampled_seqs, self.runner.execute(planned.plan).token_ids))
            for i in active:
                shadow = shadows[i]
                shadow.num_computed_tokens = shadow.num_tokens
                shadow.token_ids.append(drawn[shadow])
                proposals[i].append(drawn[shadow])
            active = [i for i in active if len(proposals[i]) < max_lengths[i]]
        self._kv = {seq.seq_id: _DraftKV(shadow.token_ids[: shadow.num_computed_tokens], seq.num_preemptions)
                    for seq, shadow in zip(seqs, shadows)}
        return proposals

    def _shadow(self, seq: Sequence) -> Sequence:
        """A copy of ``seq`` for the draft to decode: its tokens, block table and seed, with what the
        draft pool already holds of it counted as computed."""
        shadow = Sequence(request_id=seq.request_id, index=seq.index, token_ids=list(seq.token_ids),
                          num_prompt_tokens=seq.num_prompt_tokens, params=seq.params, max_tokens=seq.max_tokens,
                          arrival_time=seq.arrival_time, block_table=seq.block_table, seed=seq.seed)
        shadow.needs_prompt_logprobs = False
        shadow.num_computed_tokens = self._num_held(seq)
        return shadow

    def _num_held(self, seq: Sequence) -> int:
        """Leading tokens of ``seq`` whose draft K/V are still in its blocks: those the draft computed that
        the target kept, within the blocks the sequence still holds."""
        held = self._kv.get(seq.seq_id)
        if held is None or held.num_preemptions != seq.num_preemptions:
            return 0
        return common_prefix_length(held.token_ids, seq.token_ids[: seq.num_computed_tokens])
