"""The step's token bitmask: one row per sampled row, built from the sequences' constraints."""
from __future__ import annotations

from typing import Protocol

import torch

from autoglm.step_plan import ALL_TOKENS_ALLOWED


class NextTokenMask(Protocol):
    """What limits a sequence's next token (a ``GrammarState``, a ``SequenceConstraint``)."""

    vocab_size: int

    @property
    def masks_next(self) -> bool:
        """Whether some token is forbidden next; a row that masks nothing needs no bitmask."""
        ...

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into ``bitmask[row]``."""
        ...


def bitmask_words(vocab_size: int) -> int:
    """int32 words per row: one bit per token of the vocabulary."""
    return -(-vocab_size // 32)


def token_bit(token_id: int) -> tuple[int, int]:
    """The word that holds ``token_id``'s bit (bit ``t % 32`` of word ``t // 32``), and that bit as an int32."""
    word, bit = divmod(token_id, 32)
    return word, ((1 << bit) ^ 2**31) - 2**31


def build_token_bitmask(masks: list[NextTokenMask | None]) -> torch.Tensor | None:
    """int32 ``[len(masks), words]``: a masked row's allowed tokens, every bit set for a row without a
    mask or whose mask forbids nothing now; None when no row masks anything, so such a step pays nothing."""
    constrained = [(row, mask) for row, mask in enumerate(masks) if mask is not None and mask.masks_next]
    if not constrained:
        return None
    bitmask = torch.full((len(masks), bitmask_words(constrained[0][1].vocab_size)), ALL_TOKENS_ALLOWED,
                         dtype=torch.int32)
    for row, mask in constrained:
        mask.fill_bitmask(bitmask, row)
    return bitmask
