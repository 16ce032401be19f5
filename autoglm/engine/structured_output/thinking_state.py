"""One sequence's place between its thinking and its answer, and the thinking tokens it has written."""
from __future__ import annotations

from enum import Enum

from autoglm.thinking import ThinkingBounds, ThinkingPhase


class OutputPhase(Enum):
    NOT_BEGUN = "not_begun"  # no token yet: the start token opens the thinking, any other starts the answer
    THINKING = "thinking"  # the output so far is thinking, counted against the budget
    ANSWER = "answer"  # the thinking is over (or never was): what follows is the answer


_FIRST_PHASE = {
    ThinkingPhase.OPEN: OutputPhase.THINKING,
    ThinkingPhase.CLOSED: OutputPhase.ANSWER,
    ThinkingPhase.NOT_BEGUN: OutputPhase.NOT_BEGUN,
}


class ThinkingState:
    """Advanced by each token the sequence keeps, once, as a grammar state is: a preemption keeps it
    with the output, so recompute goes on from the same phase and count.

    Once ``budget`` thinking tokens are written the end token is forced, so a budgeted thinking holds
    exactly ``budget`` tokens. The start token inside the thinking or the answer is an ordinary token, as
    is the end token in the answer; the end token that closes the thinking is not a thinking token.
    """

    def __init__(self, bounds: ThinkingBounds) -> None:
        self.bounds = bounds
        self.phase = _FIRST_PHASE[bounds.phase]
        self.num_thinking_tokens = 0

    @property
    def must_end(self) -> bool:
        """Whether the budget is spent: the end token is the only one allowed next."""
        budget = self.bounds.budget
        return self.phase is OutputPhase.THINKING and budget is not None and self.num_thinking_tokens >= budget

    @property
    def counts_down(self) -> bool:
        """Whether a later token may be forced: a budget, and the answer not reached yet."""
        return self.bounds.budget is not None and self.phase is not OutputPhase.ANSWER

    @property
    def max_proposals(self) -> int | None:
        """How many proposed tokens the sequence may verify in one step (None: no limit). Every position
        verified together is sampled unmasked, so under a budget none may be forced nor decide the phase: none
        before the first token, and while thinking only as many as keep every position before the forced one."""
        if not self.counts_down:
            return None
        if self.phase is OutputPhase.NOT_BEGUN:
            return 0
        return max(0, self.bounds.budget - self.num_thinking_tokens - 1)

    def is_answer_token(self, token_id: int) -> bool:
        """Whether ``token_id``, taken next, is part of the answer."""
        if self.phase is OutputPhase.NOT_BEGUN:
            return token_id != self.bounds.start_token_id
        return self.phase is OutputPhase.ANSWER

    def accept(self, token_id: int) -> None:
        """Move past a token the sequence keeps."""
        if self.phase is OutputPhase.NOT_BEGUN:
            opens = token_id == self.bounds.start_token_id
            self.phase = OutputPhase.THINKING if opens else OutputPhase.ANSWER
        elif self.phase is OutputPhase.THINKING:
            if token_id == self.bounds.end_token_id:
                self.phase = OutputPhase.ANSWER
            else:
                self.num_thinking_tokens += 1
