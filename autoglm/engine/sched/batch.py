"""The work of one engine step, as the scheduler hands it to the engine and its policies read it."""
from __future__ import annotations

from dataclasses import dataclass, field

from autoglm.engine.sequence import Sequence


@dataclass
class ScheduledBatch:
    """The work of one engine step."""

    seqs: list[Sequence] = field(default_factory=list)
    num_new_tokens: list[int] = field(default_factory=list)
    # Slots held past each sequence's tokens for proposed tokens to be verified (speculative decoding).
    num_lookahead_tokens: list[int] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    num_tokens: int = 0  # the sum of ``num_new_tokens`` and ``num_lookahead_tokens``

    def add(self, seq: Sequence, num_new_tokens: int, num_lookahead_tokens: int = 0) -> None:
        self.seqs.append(seq)
        self.num_new_tokens.append(num_new_tokens)
        self.num_lookahead_tokens.append(num_lookahead_tokens)
        self.num_tokens += num_new_tokens + num_lookahead_tokens

    def remove(self, seq: Sequence) -> None:
        index = self.seqs.index(seq)
        self.num_tokens -= self.num_new_tokens.pop(index) + self.num_lookahead_tokens.pop(index)
        del self.seqs[index]
