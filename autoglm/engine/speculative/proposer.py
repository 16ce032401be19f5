"""What every proposer offers the engine, and which sequences may be proposed for."""
from __future__ import annotations

from typing import Protocol

from autoglm.engine.sequence import Sequence


class Proposer(Protocol):
    """Guesses the next tokens of decoding sequences, for the target to verify."""

    def propose(self, seqs: list[Sequence], max_lengths: list[int]) -> list[list[int]]:
        """At most ``max_lengths[i]`` tokens that may follow ``seqs[i]`` (possibly none).

        Called after scheduling, when each sequence's block table already holds its lookahead slots.
        """
        ...


def max_lookahead(seq: Sequence, num_speculative_tokens: int, max_context_len: int) -> int:
    """How many proposed tokens ``seq`` may verify next step: none for a constrained request (its grammar
    must see each token before the next is chosen), else as many as fit its max_tokens and the context
    together with the token the target adds after them, and its thinking budget before the token it forces
    (see ``ThinkingState.max_proposals``)."""
    if seq.params.structured_outputs is not None:
        return 0
    room = min(seq.max_tokens - seq.num_output_tokens, max_context_len - seq.num_tokens) - 1
    thinking = seq.constraint.thinking if seq.constraint is not None else None
    if thinking is not None and thinking.max_proposals is not None:
        room = min(room, thinking.max_proposals)
    return max(0, min(num_speculative_tokens, room))
