"""N-gram prompt lookup: propose what followed the sequence's latest tokens where they occurred before.

No extra model: text that quotes its context (code edits, summaries, retrieval answers) repeats
long runs of it, and those runs cost one target pass instead of one each.
"""
from __future__ import annotations

from autoglm.engine.sequence import Sequence


class NgramProposer:
    """Tries the longest n-gram first, from ``prompt_lookup_max`` down to ``prompt_lookup_min`` tokens."""

    def __init__(self, prompt_lookup_min: int, prompt_lookup_max: int) -> None:
        self.prompt_lookup_min = prompt_lookup_min
        self.prompt_lookup_max = prompt_lookup_max

    def propose(self, seqs: list[Sequence], max_lengths: list[int]) -> list[list[int]]:
        return [lookup(seq.token_ids, self.prompt_lookup_min, self.prompt_lookup_max, length)
                for seq, length in zip(seqs, max_lengths)]


def lookup(token_ids: list[int], min_n: int, max_n: int, max_length: int) -> list[int]:
    """Up to ``max_length`` tokens that followed the most recent earlier occurrence of the last n tokens,
    for the largest n in [min_n, max_n] that occurs; [] when none does."""
    if max_length <= 0:
        return []
    for n in range(min(max_n, len(token_ids) - 1), min_n - 1, -1):
        pattern = token_ids[-n:]
        first = pattern[0]
        # Latest start first; the occurrence must end before the pattern itself does.
        for start in range(len(token_ids) - n - 1, -1, -1):
            if token_ids[start] == first and token_ids[start : start + n] == pattern:
                return token_ids[start + n : start + n + max_length]
    return []
