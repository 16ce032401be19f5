"""Per-step attention inputs in flat varlen form, built once by a backend and read by every layer."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


def context_slots(block_table: torch.Tensor, block_size: int, length: int) -> torch.Tensor:
    """Cache slots of the first ``length`` tokens of each block table (``[..., max_blocks]``)."""
    offsets = torch.arange(block_size, device=block_table.device)
    return (block_table.unsqueeze(-1) * block_size + offsets).flatten(-2)[..., :length]


@dataclass(frozen=True)
class TokenQueries:
    """Queries attended one at a time, each over its own causal context in the paged cache, as a decode
    step attends its one token; and the rows whose queries are left to attend together."""

    tokens: slice | torch.Tensor  # their places in the flat batch
    block_tables: torch.Tensor  # [N, max_blocks]: each query's row's block table
    context_lens: torch.Tensor  # [N] long: each query's position + 1
    other_rows: list[int]

    @property
    def any(self) -> bool:
        return self.context_lens.numel() > 0


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
    _token_queries: dict[int, TokenQueries] = field(default_factory=dict, repr=False)

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

    def token_queries(self, max_query_len: int) -> TokenQueries:
        """Every query of the rows of at most ``max_query_len`` tokens as a decode query of its own, over the
        context up to and including it; built once per step. Decode rows alone need no gathering."""
        if max_query_len not in self._token_queries:
            starts = self.host_cu_seqlens_q
            query_lens = [starts[row + 1] - starts[row] for row in range(self.num_rows)]
            short = [row for row, query_len in enumerate(query_lens) if query_len <= max_query_len]
            others = [row for row, query_len in enumerate(query_lens) if query_len > max_query_len]
            if len(short) == self.num_decode_tokens:  # decode rows lead the batch, one token each
                queries = TokenQueries(slice(0, self.num_decode_tokens), self.decode_block_tables(),
                                       self.decode_seq_lens(), others)
            else:
                tokens = [starts[row] + i for row in short for i in range(query_lens[row])]
                rows = [row for row in short for _ in range(query_lens[row])]
                context_lens = [self.host_seq_lens[row] - query_lens[row] + i + 1
                                for row in short for i in range(query_lens[row])]
                device = self.block_tables.device
                # Leading tokens (a batch of one verification row) are a view, not a gather and a scatter.
                leading = tokens[-1] == len(tokens) - 1
                queries = TokenQueries(slice(0, len(tokens)) if leading else torch.tensor(tokens, device=device),
                                       self.block_tables[torch.tensor(rows, device=device)],
                                       torch.tensor(context_lens, dtype=torch.long, device=device), others)
            self._token_queries[max_query_len] = queries
        return self._token_queries[max_query_len]
