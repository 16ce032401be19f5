"""The step's token bitmask: one row per sampled row, built from the sequences' grammar states."""
from __future__ import annotations

import torch

from autoglm.engine.structured_output.grammar_state import GrammarState
from autoglm.step_plan import ALL_TOKENS_ALLOWED


def bitmask_words(vocab_size: int) -> int:
    """int32 words per row: one bit per token of the vocabulary."""
    return -(-vocab_size // 32)


def build_token_bitmask(states: list[GrammarState | None]) -> torch.Tensor | None:
    """int32 ``[len(states), words]``: a constrained row's allowed tokens, every bit set for an
    unconstrained one; None when no row is constrained, so such a step pays nothing."""
    constrained = [(row, state) for row, state in enumerate(states) if state is not None]
    if not constrained:
        return None
    bitmask = torch.full((len(states), bitmask_words(constrained[0][1].vocab_size)), ALL_TOKENS_ALLOWED,
                         dtype=torch.int32)
    for row, state in constrained:
        state.fill_bitmask(bitmask, row)
    return bitmask
