"""Flatten one scheduled step into model inputs: token ids, positions and attention metadata."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.engine.sequence import Sequence
from autoglm.runner.attention.metadata import AttentionMetadata, PrefillSpan, context_slots


@dataclass
class StepInputs:
    """Tensors for one forward pass, rows ordered decodes first then prefill chunks."""

    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    attention: AttentionMetadata
    seqs: list[Sequence]  # in row order
    query_starts: list[int]  # first row of each sequence
    query_lens: list[int]


def build_step_inputs(
    seqs: list[Sequence], num_new_tokens: list[int], block_size: int, device: torch.device
) -> StepInputs:
    """Order the step's sequences (single-token queries first) and build every input tensor."""
    order = sorted(range(len(seqs)), key=lambda i: num_new_tokens[i] != 1)
    seqs = [seqs[i] for i in order]
    query_lens = [num_new_tokens[i] for i in order]
    token_ids: list[int] = []
    positions: list[int] = []
    slots: list[int] = []
    query_starts: list[int] = []
    for seq, query_len in zip(seqs, query_lens):
        start = seq.num_computed_tokens
        query_starts.append(len(token_ids))
        token_ids.extend(seq.token_ids[start : start + query_len])
        for position in range(start, start + query_len):
            slots.append(seq.block_table[position // block_size] * block_size + position % block_size)
        positions.extend(range(start, start + query_len))

    num_decodes = sum(1 for query_len in query_lens if query_len == 1)
    metadata = AttentionMetadata(
        slot_mapping=torch.tensor(slots, dtype=torch.long, device=device),
        block_size=block_size,
        num_decode_tokens=num_decodes,
    )
    if num_decodes:
        _add_decode_metadata(metadata, seqs[:num_decodes], block_size, device)
    for row, seq, query_len in zip(query_starts[num_decodes:], seqs[num_decodes:], query_lens[num_decodes:]):
        metadata.prefills.append(_prefill_span(row, seq, query_len, block_size, device))
    return StepInputs(
        input_ids=torch.tensor(token_ids, dtype=torch.long, device=device),
        positions=torch.tensor(positions, dtype=torch.long, device=device),
        attention=metadata,
        seqs=seqs,
        query_starts=query_starts,
        query_lens=query_lens,
    )


def _add_decode_metadata(
    metadata: AttentionMetadata, seqs: list[Sequence], block_size: int, device: torch.device
) -> None:
    context_lens = [seq.num_computed_tokens + 1 for seq in seqs]
    max_blocks = -(-max(context_lens) // block_size)
    tables = [seq.block_table[:max_blocks] + [0] * (max_blocks - len(seq.block_table[:max_blocks])) for seq in seqs]
    metadata.decode_block_tables = torch.tensor(tables, dtype=torch.long, device=device)
    metadata.decode_context_lens = torch.tensor(context_lens, dtype=torch.long, device=device)


def _prefill_span(row: int, seq: Sequence, query_len: int, block_size: int, device: torch.device) -> PrefillSpan:
    cached = seq.num_computed_tokens
    context_len = cached + query_len
    if cached == 0:
        return PrefillSpan(row, query_len, context_len, None, None)
    num_blocks = -(-context_len // block_size)
    table = torch.tensor(seq.block_table[:num_blocks], dtype=torch.long, device=device)
    query_positions = torch.arange(cached, context_len, device=device)
    mask = torch.arange(context_len, device=device).unsqueeze(0) <= query_positions.unsqueeze(1)
    return PrefillSpan(row, query_len, context_len, context_slots(table, block_size, context_len), mask)
