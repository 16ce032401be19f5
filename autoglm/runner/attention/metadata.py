"""Per-step attention inputs, built once by the runner and shared by every layer."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Iterator

import torch


@dataclass
class PrefillSpan:
    """One sequence's prefill chunk inside the flattened batch."""

    start: int  # first row of this chunk in the flattened token batch
    query_len: int  # new tokens in this step
    context_len: int  # tokens in the cache once this step's K/V are written
    context_slots: torch.Tensor | None  # [context_len] cache slots; None when there is no cached prefix
    mask: torch.Tensor | None  # [query_len, context_len] bool, True where a query may attend


def context_slots(block_table: torch.Tensor, block_size: int, length: int) -> torch.Tensor:
    """Cache slots of the first ``length`` tokens of each block table (``[..., max_blocks]``)."""
    offsets = torch.arange(block_size, device=block_table.device)
    return (block_table.unsqueeze(-1) * block_size + offsets).flatten(-2)[..., :length]


@dataclass
class AttentionMetadata:
    """Where each new token's K/V goes and which cached slots each query reads.

    Decode sequences (one query token each) come first in the flattened batch, rows
    ``[0, num_decode_tokens)``, described by their block tables and context lengths (the
    new token included); prefill chunks follow, one :class:`PrefillSpan` each.
    """

    slot_mapping: torch.Tensor  # [num_tokens] cache slot of each new token
    block_size: int
    num_decode_tokens: int = 0
    decode_block_tables: torch.Tensor | None = None  # [num_decodes, max_blocks] long, padded with 0
    decode_context_lens: torch.Tensor | None = None  # [num_decodes] long
    prefills: list[PrefillSpan] = field(default_factory=list)
    _padded_decode_context: tuple[torch.Tensor, torch.Tensor] | None = None

    def padded_decode_context(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode contexts as padded slots ``[num_decodes, max_context]`` and their mask
        ``[num_decodes, 1, 1, max_context]``, for backends that gather; built once per step."""
        if self._padded_decode_context is None:
            lengths = self.decode_context_lens
            max_context = int(lengths.max())
            slots = context_slots(self.decode_block_tables, self.block_size, max_context)
            mask = torch.arange(max_context, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
            self._padded_decode_context = slots, mask[:, None, None, :]
        return self._padded_decode_context


_current: AttentionMetadata | None = None


def get_attention_metadata() -> AttentionMetadata | None:
    """The metadata of the forward pass in progress, or None outside one."""
    return _current


@contextlib.contextmanager
def attention_metadata(metadata: AttentionMetadata | None) -> Iterator[None]:
    """Make ``metadata`` visible to every attention layer for the duration of a forward."""
    global _current
    previous, _current = _current, metadata
    try:
        yield
    finally:
        _current = previous
