"""One sequence's place in its grammar: which tokens may come next, advanced by each token it keeps."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import xgrammar


class GrammarState:
    """A grammar matcher of one sequence (each of a request's n completions has its own).

    Only tokens the sequence keeps advance it, and each exactly once (the engine accepts a token as
    it appends it), so a preemption, which recomputes the sequence's KV but keeps its output tokens,
    leaves it where it was. Nothing is ever taken back: a constrained request gets no speculative
    proposals and no overlapped steps, so every token it is handed has been masked by this state.
    """

    def __init__(self, compiled: xgrammar.CompiledGrammar, vocab_size: int) -> None:
        import xgrammar

        self._matcher = xgrammar.GrammarMatcher(compiled)
        self.vocab_size = vocab_size

    def accept(self, token_id: int) -> None:
        """Advance past ``token_id``. The step's mask allowed only tokens the grammar accepts, so a
        refused one means the mask and the matcher disagree: a bug, not the caller's input."""
        if not self._matcher.accept_token(token_id):
            raise RuntimeError(f"the grammar refused token {token_id}, which this step's mask allowed")

    @property
    def is_terminated(self) -> bool:
        """The grammar is complete and has accepted its stop token: nothing more may follow."""
        return self._matcher.is_terminated()

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into ``bitmask[row]`` (bit ``t % 32`` of word ``t // 32``)."""
        self._matcher.fill_next_token_bitmask(bitmask, row)
