"""N-gram prompt lookup: what follows the latest earlier occurrence of the longest matching tail."""
from autoglm.engine.speculative.ngram import lookup


def test_proposes_what_followed_the_tail_before():
    assert lookup([1, 2, 3, 4, 5, 9, 2, 3], 2, 3, 2) == [4, 5]


def test_prefers_the_longest_n_gram():
    # The 1-gram [3] last occurred before 7, the 2-gram [2, 3] before 4.
    assert lookup([2, 3, 4, 3, 7, 2, 3], 1, 2, 1) == [4]


def test_takes_the_most_recent_occurrence():
    assert lookup([5, 6, 1, 5, 6, 2, 5, 6], 2, 2, 1) == [2]


def test_nothing_below_prompt_lookup_min_or_without_a_match():
    assert lookup([1, 2, 3, 9, 3], 2, 3, 4) == []
    assert lookup([1, 2, 3, 4], 1, 2, 4) == []
    assert lookup([1, 2, 1, 2], 1, 2, 0) == []


def test_a_proposal_may_run_into_the_tail_itself():
    assert lookup([7, 7, 7], 1, 2, 3) == [7]
