"""Fixed device buffers for decode steps, refilled in place, so a captured graph reads each step from one address.

A step of ``n`` rows fills the first ``n`` rows and pads up to the batch size it runs at. A padding
row is a one-token context in the scratch block, a block the block manager never hands out: its
K/V write lands there and its attention reads only that, so padding disturbs neither real rows
nor the cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.attention.metadata import AttentionMetadata
from autoglm.device_transfer import staged_for
from autoglm.step_plan import StepPlan


@dataclass
class DecodeBuffers:
    """Token ids, positions, slots, context lengths and block tables of up to ``max_batch`` decode rows."""

    input_ids: torch.Tensor  # [max_batch] long
    positions: torch.Tensor  # [max_batch] long
    slot_mapping: torch.Tensor  # [max_batch] long
    seq_lens: torch.Tensor  # [max_batch] long
    cu_seqlens_q: torch.Tensor  # [max_batch + 1] long: row r is token r, always
    block_tables: torch.Tensor  # [max_batch, max_blocks] long
    block_size: int
    scratch_block: int

    @classmethod
    def allocate(cls, max_batch: int, max_blocks: int, block_size: int, scratch_block: int,
                 device: torch.device) -> DecodeBuffers:
        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(*shape, dtype=torch.long, device=device)

        buffers = cls(zeros(max_batch), zeros(max_batch), zeros(max_batch), zeros(max_batch),
                      torch.arange(max_batch + 1, device=device), zeros(max_batch, max_blocks), block_size,
                      scratch_block)
        buffers.pad(0, max_batch)
        return buffers

    @property
    def max_batch(self) -> int:
        return int(self.input_ids.shape[0])

    def pad(self, start: int, stop: int) -> None:
        """Make rows ``[start, stop)`` padding: token 0 at position 0, in the scratch block."""
        self.input_ids[start:stop] = 0
        self.positions[start:stop] = 0
        self.slot_mapping[start:stop] = self.scratch_block * self.block_size
        self.seq_lens[start:stop] = 1
        self.block_tables[start:stop, 0] = self.scratch_block

    def fill(self, plan: StepPlan, batch: int) -> None:
        """Copy a pure-decode plan's rows in and pad the rest up to ``batch``; table columns past the plan's are
        left as they were, as no row's context reaches them."""
        rows = len(plan.query_lens)
        device = self.input_ids.device
        for buffer, values in ((self.input_ids[:rows], plan.input_ids), (self.positions[:rows], plan.positions),
                               (self.slot_mapping[:rows], plan.slot_mapping),
                               (self.seq_lens[:rows], torch.tensor(plan.seq_lens)),
                               (self.block_tables[:rows, : plan.block_tables.shape[1]], plan.block_tables)):
            buffer.copy_(staged_for(values, device), non_blocking=True)
        self.pad(rows, batch)

    def metadata(self, batch: int, host_seq_lens: list[int]) -> AttentionMetadata:
        """Attention metadata viewing the first ``batch`` rows (``host_seq_lens``: their lengths, padding's 1)."""
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[:batch], block_size=self.block_size,
            cu_seqlens_q=self.cu_seqlens_q[: batch + 1], seq_lens=self.seq_lens[:batch],
            block_tables=self.block_tables[:batch], num_decode_tokens=batch, max_query_len=1,
            max_seq_len=max(host_seq_lens), host_cu_seqlens_q=list(range(batch + 1)), host_seq_lens=host_seq_lens,
        )
