"""Per-step attention inputs in flat varlen form, built once by a backend and read by every layer."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


def context_slots(block_table: torch.Tensor, block_size: int, length: int) -> torch.Tensor:
    """Cache slots of the first ``length`` tokens of each block table (``[..., max_blocks]``)."""
    offsets = torch.arange(block_size, device=block_table.device)
    return (block_table.unsqueeze(-1) * block_size + offsets).flatten(-2)[..., :length]


@dataclass
class AttentionMetadata:
    """Where each new token's K/V goes and which cached slots each row's queries read.

    Row ``r``'s queries are tokens ``cu_seqlens_q[r]:cu_seqlens_q[r + 1]`` of the flattened batch
    and attend over the first ``seq_lens[r]`` tokens of its context (this step's included), which
    live in the blocks of ``block_tables[r]``. Single-token rows come first: tokens
    ``[0, num_decode_tokens)`` are one decode row each. The ``host_`` lists repeat the row
    boundaries on the CPU so that loops over rows never wait on the device.
    """

    slot_mapping: torch.Tensor  # [num_tokens] long: cache slot of each new token
    block_size: int
    cu_seqlens_q: torch.Tensor  # [num_rows + 1] long: first token of each row, then the total
    seq_lens: torch.Tensor  # [num_rows] long: context length of each row once this step is written
    block_tables: torch.Tensor  # [num_rows, max_blocks] long, padded with block 0
    num_decode_tokens: int
    max_query_len: int
    max_seq_len: int
    host_cu_seqlens_q: list[int]
    host_seq_lens: list[int]
    _derived: dict[object, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict, repr=False)

    @property
    def num_rows(self) -> int:
        return len(self.host_seq_lens)

    def decode_block_tables(self) -> torch.Tensor:
        return self.block_tables[: self.num_decode_tokens]

    def decode_seq_lens(self) -> torch.Tensor:
        return self.seq_lens[: self.num_decode_tokens]

    def padded_decode_context(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode contexts as padded slots ``[num_decodes, max_context]`` and their mask
        ``[num_decodes, 1, 1, max_context]``, for backends that gather; built once per step."""
        if "decode" not in self._derived:
            lengths = self.decode_seq_lens()
            max_context = max(self.host_seq_lens[: self.num_decode_tokens])
            slots = context_slots(self.decode_block_tables(), self.block_size, max_context)
            mask = torch.arange(max_context, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
            self._derived["decode"] = slots, mask[:, None, None, :]
        return self._derived["decode"]

    def prefix_context(self, row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A chunk after a cached prefix: its context's slots ``[L]`` and the mask ``[Q, L]`` of what
        each query may attend; built once per step, not once per layer."""
        if row not in self._derived:
            context_len = self.host_seq_lens[row]
            query_len = self.host_cu_seqlens_q[row + 1] - self.host_cu_seqlens_q[row]
            device = self.block_tables.device
            slots = context_slots(self.block_tables[row], self.block_size, context_len)
            query_positions = torch.arange(context_len - query_len, context_len, device=device)
            mask = torch.arange(context_len, device=device).unsqueeze(0) <= query_positions.unsqueeze(1)
            self._derived[row] = slots, mask
        return self._derived[row]
