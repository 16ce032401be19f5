"""Verification keeps the proposals up to the first the target did not draw."""
from autoglm.engine.speculative.metrics import SpecDecodeStats
from autoglm.engine.speculative.verify import num_accepted


def test_keeps_the_proposals_the_target_drew():
    assert num_accepted([4, 5, 6], [4, 5, 6, 7]) == 3
    assert num_accepted([4, 5, 6], [4, 9, 6, 7]) == 1
    assert num_accepted([4, 5, 6], [1, 5, 6, 7]) == 0
    assert num_accepted([], [3]) == 0


def test_counts_acceptance_by_position():
    stats = SpecDecodeStats()
    stats.record(3, 2)
    stats.record(2, 0)
    stats.record(0, 0)  # nothing proposed: not a draft
    stats.record(4, 4)
    assert (stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens) == (3, 9, 6)
    assert stats.accepted_per_position == [2, 2, 1, 1]
    assert stats.acceptance_rate == 6 / 9
