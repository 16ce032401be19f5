"""Everything that limits one sequence's tokens, as one object the scheduler, the plan builder and the
engine ask: its grammar, its thinking, or both, the grammar then applying to the answer alone."""
from __future__ import annotations

import torch

from autoglm.engine.structured_output.bitmask import token_bit
from autoglm.engine.structured_output.grammar_state import GrammarState
from autoglm.engine.structured_output.thinking_state import OutputPhase, ThinkingState


class SequenceConstraint:
    """A sequence's grammar state and thinking state together (each optional, not both absent).

    Thinking tokens and the end token that closes the thinking never reach the grammar: its matcher
    accepts the answer's tokens only, and its mask applies at answer positions only. While the thinking
    runs under its budget nothing is masked; once the budget is spent only the end token is allowed.
    Before the first token, a grammar's first mask also allows the start token: the model may open its
    thinking, or start the answer, which the grammar then matches from its first token.
    """

    def __init__(self, grammar: GrammarState | None, thinking: ThinkingState | None, vocab_size: int) -> None:
        if grammar is None and thinking is None:
            raise ValueError("a sequence constraint needs a grammar, a thinking state or both")
        self.grammar = grammar
        self.thinking = thinking
        self.vocab_size = vocab_size

    @property
    def _grammar_masks_next(self) -> bool:
        """Whether the next token is the grammar's to mask: an answer token, or the first token."""
        return self.grammar is not None and (self.thinking is None or self.thinking.phase is not OutputPhase.THINKING)

    @property
    def masks_next(self) -> bool:
        """Whether some token is forbidden next: a grammar's answer position, or the forced end token."""
        return self._grammar_masks_next or (self.thinking is not None and self.thinking.must_end)

    @property
    def mask_ready(self) -> bool:
        """Whether the mask of the next token is known (a grammar's is computed on a mask thread)."""
        return not self._grammar_masks_next or self.grammar.mask_ready

    @property
    def reads_each_token(self) -> bool:
        """Whether the next token's mask may depend on the last token, so that the next step can be planned
        only once it is on the host: a grammar, or a budget that may yet force the end token."""
        return self.grammar is not None or self.thinking.counts_down

    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the tokens allowed next into ``bitmask[row]``; only called while ``masks_next``."""
        thinking = self.thinking
        if thinking is not None and thinking.must_end:
            word, bit = token_bit(thinking.bounds.end_token_id)
            bitmask[row] = 0
            bitmask[row, word] = bit
            return
        self.grammar.fill_bitmask(bitmask, row)
        if thinking is not None and thinking.phase is OutputPhase.NOT_BEGUN:
            word, bit = token_bit(thinking.bounds.start_token_id)
            bitmask[row, word] |= bit

    def accept(self, token_id: int) -> None:
        """Move past a token the sequence keeps: the grammar only if it is an answer token."""
        if self.grammar is not None and self._is_answer_token(token_id):
            self.grammar.accept(token_id)
        if self.thinking is not None:
            self.thinking.accept(token_id)

    def terminates(self, token_id: int) -> bool:
        """Whether taking ``token_id`` ends the grammar: only a stop token of the answer does."""
        return self.grammar is not None and self._is_answer_token(token_id) and self.grammar.terminates(token_id)

    def close(self) -> None:
        """The sequence has ended: its grammar's pending mask job is dropped."""
        if self.grammar is not None:
            self.grammar.close()

    def _is_answer_token(self, token_id: int) -> bool:
        return self.thinking is None or self.thinking.is_answer_token(token_id)


def new_constraint(grammar: GrammarState | None, thinking: ThinkingState | None,
                   vocab_size: int) -> SequenceConstraint | None:
    """The constraint of a sequence with this grammar and thinking; None when neither limits a token (no
    grammar, and no budget still to spend), so that a free sequence costs the step nothing."""
    if grammar is None and (thinking is None or not thinking.counts_down):
        return None
    return SequenceConstraint(grammar, thinking, vocab_size)
