import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autoglm.runner import top_k_top_p
from autoglm.runner.top_k_top_p import apply_top_k_top_p

VOCAB = 20000  # wider than every candidate width, so each widening step can be reached


def kept(logits, top_k=None, top_p=None):
    """The kept tokens of each row, as sets; ``top_k``/``top_p`` lists, None for no filter."""
    vocab = logits.shape[1]
    top_k_tensor = None if top_k is None else torch.tensor([k if 0 < k < vocab else vocab for k in top_k])
    max_top_k = max((k for k in top_k or [] if 0 < k < vocab), default=0)
    top_p_tensor = None if top_p is None else torch.tensor(top_p)
    filtered = apply_top_k_top_p(logits, top_k_tensor, top_p_tensor, max_top_k)
    return [set(row.nonzero().squeeze(1).tolist()) for row in filtered > float("-inf")]


def float32_sum_error(count: torch.Tensor) -> torch.Tensor:
    """A bound on the error of a float32 running sum of ``count`` probabilities (each a float32 exp,
    the sum at most 1): the exps' rounding, then each addition's, at most 2**-24 of the sum each."""
    return 1e-5 + count * 2.0**-23


def reference(row, k, p, slack=0):
    """One row by the definition, in float64: every token at or above the k-th largest logit, then
    every token at or above the least likely of the fewest most likely tokens whose probability
    reaches p; ``slack`` -1 or 1 moves p by the float32 rounding a running sum of that many tokens
    may carry, down or up."""
    row = row.double()
    order = row.sort(descending=True).values
    threshold = order[k - 1].item() if 0 < k < len(row) else float("-inf")
    probs = row.masked_fill(row < threshold, float("-inf")).softmax(dim=-1).sort(descending=True).values
    mass_before = probs.cumsum(dim=0) - probs
    if p < 1:
        tolerance = float32_sum_error(torch.arange(len(row), dtype=torch.float64))
        count = max(1, int((mass_before < p + slack * tolerance).sum()))
        threshold = max(threshold, order[count - 1].item())
    return set((row >= threshold).nonzero().squeeze(1).tolist())


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(
    seed=st.integers(0, 2**31),
    scale=st.sampled_from([0.01, 0.5, 2.0, 8.0]),  # flat rows reach past every candidate width
    top_k=st.lists(st.sampled_from([0, 1, 7, 1024, 1025, 9000, VOCAB]), min_size=3, max_size=3),
    top_p=st.lists(st.sampled_from([1.0, 0.3, 0.9, 0.999, 1e-46]), min_size=3, max_size=3),  # 1e-46: 0 in float32
)
def test_each_row_keeps_what_the_definition_keeps(seed, scale, top_k, top_p):
    """Up to float32 rounding of the running probability: a nucleus may end a few tokens early or
    late only where the running sum lies within that rounding's bound of top_p."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, VOCAB, generator=generator) * scale
    for row, k, p, kept_row in zip(logits, top_k, top_p, kept(logits, top_k, top_p)):
        assert reference(row, k, p, slack=-1) <= kept_row <= reference(row, k, p, slack=1)


def test_a_row_keeps_the_same_tokens_alone_or_beside_rows_that_need_a_wider_search():
    torch.manual_seed(0)
    logits = torch.cat([torch.randn(2, VOCAB) * 8, torch.randn(2, VOCAB) * 0.01])
    together = kept(logits, top_p=[0.9] * 4)
    assert together == [kept(logits[row:row + 1], top_p=[0.9])[0] for row in range(4)]
    assert len(together[0]) < 1024 < 8192 < len(together[2])  # both searches taken


def test_candidate_search_and_full_sort_agree(monkeypatch):
    torch.manual_seed(1)
    logits = torch.randn(8, VOCAB) * torch.tensor([0.01, 0.3, 1.0, 3.0, 8.0, 0.5, 2.0, 5.0]).unsqueeze(1)
    settings_ = dict(top_k=[0, 50, 2000, 0, 9000, 0, 30, 0], top_p=[0.95, 0.9, 0.8, 0.5, 1.0, 0.99, 0.7, 0.9])
    with_candidates = kept(logits, **settings_)
    monkeypatch.setattr(top_k_top_p, "_CPU_CANDIDATE_WIDTHS", ())
    assert kept(logits, **settings_) == with_candidates


def test_top_p_reads_the_mass_of_every_token_tied_at_the_k_th_logit():
    """Top-k keeps all three 3.0s, though the first k + 1 largest logits hold only two of them: the
    mass top-p measures must still count the third (with it, 0.78 is reached only after the first
    3.0, which keeps every tie; without it, after the 4.0)."""
    logits = torch.tensor([[5.0, 4.0, 3.0, 3.0, 3.0] + [-10.0] * 5])
    assert kept(logits, [3], [0.78]) == [{0, 1, 2, 3, 4}]


@pytest.mark.parametrize("top_k, top_p, expected", [
    (2, None, {0, 1, 2, 3}),  # the 2nd largest logit is tied three ways: all three stay
    (1, None, {0}),
    (None, 0.5, {0, 1, 2, 3}),  # the nucleus ends inside the tie
    (None, 0.2, {0}),
])
def test_tokens_tied_at_the_boundary_are_all_kept(top_k, top_p, expected):
    logits = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0]])
    assert kept(logits, None if top_k is None else [top_k], None if top_p is None else [top_p]) == [expected]


def test_rows_whose_nucleus_takes_all_their_top_k_are_searched_wider():
    """Every row has a top-k, so the search starts at the largest k; a nucleus covering all of its
    row's k tokens is settled only one width further, and must keep exactly those k."""
    torch.manual_seed(2)
    logits = torch.randn(4, VOCAB) * 0.01
    top_k = [7, 7, 50, 3]
    kept_rows = kept(logits, top_k, [0.999, 0.5, 0.999, 0.999])
    assert [len(row) for row in kept_rows] == [7, 4, 50, 3]
    assert kept_rows == [reference(row, k, p) for row, k, p in zip(logits, top_k, [0.999, 0.5, 0.999, 0.999])]
