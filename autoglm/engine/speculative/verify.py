"""Verification: which proposed tokens the target keeps.

The target samples at the last real token and at every proposed one, each position with the draw
plain decoding would make there (the sequence's seed and output index, see
:func:`~autoglm.engine.plan_builder.row_sampling`). A proposal is kept while it equals the target's
own draw; the first draw that differs, or the draw after the last proposal, is the bonus token.

This is rejection sampling realized with the target's draws as the random source. For a greedy
request it is the identical-token rule. For a proposal q that is a point mass (n-gram lookup) it is
exactly the standard rule: a proposal x is kept with probability p(x) = min(1, p(x)/q(x)), and on
rejection the target's draw is distributed as norm(max(0, p - q)). For a draft model that samples
with the same seeded draws, it keeps x whenever both models' draws agree, which keeps p exactly.
Either way every request gets the tokens plain decoding draws from the same logits.
"""
from __future__ import annotations


def num_accepted(proposed: list[int], drawn: list[int]) -> int:
    """Leading proposals equal to the target's draws at their positions (``drawn`` has one more entry)."""
    return common_prefix_length(proposed, drawn)


def common_prefix_length(first: list[int], second: list[int]) -> int:
    count = 0
    for a, b in zip(first, second):
        if a != b:
            break
        count += 1
    return count
