"""Acceptance counters of speculative decoding, under vLLM's spec_decode names."""
from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass
class SpecDecodeStats:
    """Drafts verified, tokens proposed and accepted, and acceptances by position within a draft."""

    num_drafts: int = 0  # sequences' proposals verified (a sequence with none proposed is not counted)
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)  # [i]: drafts whose token i was kept

    def record(self, num_proposed: int, num_accepted: int) -> None:
        if num_proposed == 0:
            return
        self.num_drafts += 1
        self.num_draft_tokens += num_proposed
        self.num_accepted_tokens += num_accepted
        missing = num_proposed - len(self.accepted_per_position)
        self.accepted_per_position.extend([0] * max(0, missing))
        for position in range(num_accepted):
            self.accepted_per_position[position] += 1

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0

    def snapshot(self) -> "SpecDecodeStats":
        return replace(self, accepted_per_position=list(self.accepted_per_position))
