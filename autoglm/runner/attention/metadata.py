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


@dataclass
class AttentionMetadata:
    """Where each new token's K/V goes and which cached slots each query reads.

    Decode sequences (one query token each) come first in the flattened batch, rows
    ``[0, num_decode_tokens)``; prefill chunks follow, one :class:`PrefillSpan` each.
    """

    slot_mapping: torch.Tensor  # [num_tokens] cache slot of each new token
    num_decode_tokens: int = 0
    decode_slots: torch.Tensor | None = None  # [num_decodes, max_context] slots, padded
    decode_mask: torch.Tensor | None = None  # [num_decodes, 1, 1, max_context] bool
    prefills: list[PrefillSpan] = field(default_factory=list)


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
