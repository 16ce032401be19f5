"""Turn the scheduler's batch into a :class:`~autoglm.step_plan.StepPlan`, and remember which
sequence each of its rows stands for so that the runner's arrays can be mapped back."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from autoglm.engine.sequence import Sequence
from autoglm.engine.structured_output import build_token_bitmask
from autoglm.models.mrope_positions import mrope_decode_positions
from autoglm.step_plan import PoolingChunk, PromptScoring, RowSampling, StepPlan


@dataclass
class PlannedStep:
    """A plan and the sequences behind it, in the plan's own orders."""

    plan: StepPlan
    seqs: list[Sequence]  # one per row
    sampled_seqs: list[Sequence] = field(default_factory=list)  # one per ``plan.sampling`` (k + 1 per k proposals)
    scoring_seqs: list[Sequence] = field(default_factory=list)  # one per ``plan.prompt_scoring``
    pooled_seqs: list[Sequence] = field(default_factory=list)  # one per ``plan.pooling``


def build_step_plan(seqs: list[Sequence], num_new_tokens: list[int], block_size: int,
                    eos_token_ids: set[int], proposals: dict[Sequence, list[int]] | None = None,
                    previous: PlannedStep | None = None) -> PlannedStep:
    """Rows ordered single-token queries first; each row's tokens, positions and KV slots flattened.

    A sequence with ``proposals`` (speculative decoding) also computes its proposed tokens, and samples
    at its last real token and at each proposed one, as if the proposals before were its output.
    A sequence whose last token is pending (async scheduling) leaves it to the runner to fill from the
    row that sampled it in ``previous``, the step launched just before.

    Each sampled row is masked by its sequence's constraint as it stands: a sequence gets proposals only
    while its constraint masks none of the positions they cover (see ``max_lookahead``). A pooling sequence
    samples nothing: each of its chunks is pooled instead.
    """
    proposals = proposals or {}
    previous_rows = {seq: row for row, seq in enumerate(previous.sampled_seqs)} if previous else {}
    num_new_tokens = [num_new + len(proposals.get(seq, ())) for seq, num_new in zip(seqs, num_new_tokens)]
    order = sorted(range(len(seqs)), key=lambda i: num_new_tokens[i] != 1)
    seqs = [seqs[i] for i in order]
    query_lens = [num_new_tokens[i] for i in order]
    seq_lens = [seq.num_computed_tokens + query_len for seq, query_len in zip(seqs, query_lens)]
    max_blocks = -(-max(seq_lens, default=0) // block_size)
    tables = [seq.block_table[:max_blocks] + [0] * (max_blocks - len(seq.block_table[:max_blocks])) for seq in seqs]
    token_ids: list[int] = []
    positions: list[int] = []
    sample_tokens: list[int] = []
    sampling: list[RowSampling] = []
    prompt_scoring: list[PromptScoring] = []
    sampled_seqs: list[Sequence] = []
    scoring_seqs: list[Sequence] = []
    deferred_positions: list[int] = []
    deferred_sources: list[int] = []
    pooling: list[PoolingChunk] = []
    pooled_seqs: list[Sequence] = []
    for seq, query_len, seq_len in zip(seqs, query_lens, seq_lens):
        start = seq.num_computed_tokens
        first_token = len(token_ids)
        proposed = proposals.get(seq, [])
        token_ids.extend(seq.token_ids[start:seq_len])
        if seq.last_token_pending and seq_len == seq.num_tokens:
            if seq not in previous_rows:
                raise ValueError(f"sequence {seq.seq_id} has a pending token but no row of the previous step sampled it")
            deferred_positions.append(len(token_ids) - 1)
            deferred_sources.append(previous_rows[seq])
        token_ids.extend(proposed)
        positions.extend(range(start, seq_len))
        if seq.needs_prompt_logprobs and start < seq.num_prompt_tokens - 1:
            last = min(seq_len, seq.num_prompt_tokens - 1)
            prompt_scoring.append(PromptScoring(first_token, seq.token_ids[start + 1 : last + 1],
                                                seq.params.prompt_logprobs or 0))
            scoring_seqs.append(seq)
        if seq.pooled is not None:
            pooling.append(seq.pooled.chunk(first_token, start, seq_len, seq.num_prompt_tokens))
            pooled_seqs.append(seq)
        elif seq_len == seq.num_tokens + len(proposed):
            for count in range(len(proposed) + 1):
                sample_tokens.append(len(token_ids) - 1 - len(proposed) + count)
                sampling.append(row_sampling(seq, eos_token_ids, proposed[:count]))
                sampled_seqs.append(seq)
    rows = torch.repeat_interleave(torch.arange(len(seqs)), torch.tensor(query_lens, dtype=torch.long))
    block_tables = torch.tensor(tables, dtype=torch.long).reshape(len(seqs), max_blocks)
    position_tensor = torch.tensor(positions, dtype=torch.long)
    slot_mapping = block_tables[rows, position_tensor // block_size] * block_size + position_tensor % block_size
    plan = StepPlan(
        input_ids=torch.tensor(token_ids, dtype=torch.long),
        positions=position_tensor,
        slot_mapping=slot_mapping,
        block_tables=block_tables,
        block_size=block_size,
        query_lens=query_lens,
        seq_lens=seq_lens,
        row_ids=[seq.seq_id for seq in seqs],
        sample_tokens=sample_tokens,
        sampling=sampling,
        prompt_scoring=prompt_scoring,
        deferred_positions=deferred_positions,
        deferred_sources=deferred_sources,
        token_bitmask=build_token_bitmask([seq.constraint for seq in sampled_seqs]),
        mrope_positions=_mrope_positions(seqs, query_lens, seq_lens),
        pooling=pooling,
    )
    return PlannedStep(plan, seqs, sampled_seqs, scoring_seqs, pooled_seqs)


def _mrope_positions(seqs: list[Sequence], query_lens: list[int], seq_lens: list[int]) -> torch.Tensor | None:
    """Every token's three-axis rotary positions when some row's prompt has images, else None. A row
    without images stands at its index on all three axes, as its 1-D position would."""
    if all(seq.vision is None for seq in seqs):
        return None
    return torch.cat([
        mrope_decode_positions(torch.arange(seq_len - query_len, seq_len), 0) if seq.vision is None
        else seq.vision.rotary_positions(seq_len - query_len, seq_len)
        for seq, query_len, seq_len in zip(seqs, query_lens, seq_lens)
    ], dim=1)


def row_sampling(seq: Sequence, eos_token_ids: set[int], proposed: list[int] | None = None) -> RowSampling:
    """The sequence's sampling settings as plain values for its next token, or, given ``proposed``
    tokens, for the token after them, as if they were already its output.

    Every draw derives from the sequence's seed and its draw count, never from a global RNG: a
    proposed position draws exactly what plain decoding would draw there. A row its constraint masks
    (a grammar's, or a spent thinking budget's) is not held back by min_tokens: the mask alone says where
    it may end, and banning the one token a complete grammar allows would leave nothing to sample.
    """
    params = seq.params
    proposed = proposed or []
    num_output = seq.num_output_tokens + len(proposed)
    masked = seq.constraint is not None and seq.constraint.masks_next
    short = num_output < params.min_tokens and not masked
    banned = (*eos_token_ids, *params.stop_token_ids) if short else ()
    repetition = params.repetition_penalty != 1.0
    output_penalty = repetition or params.frequency_penalty != 0.0 or params.presence_penalty != 0.0
    return RowSampling(
        greedy=params.greedy,
        temperature=params.temperature,
        top_k=params.top_k,
        top_p=params.top_p,
        min_p=params.min_p,
        repetition_penalty=params.repetition_penalty,
        frequency_penalty=params.frequency_penalty,
        presence_penalty=params.presence_penalty,
        logit_bias=params.logit_bias,
        banned_token_ids=tuple(sorted(set(banned))),
        num_logprobs=params.logprobs,
        seed=seq.seed,
        draw_index=num_output,
        prompt_token_ids=seq.prompt_token_ids if repetition else [],
        output_token_ids=seq.output_token_ids + proposed if output_penalty else [],
    )
