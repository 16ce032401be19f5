import pytest
import torch
from autoglm.runner.seeded_draw import draw_uniform, inverse_cdf_draw

VOCAB = 3000  # three blocks, the last one partial


def uniforms(count: int, seed: int = 0) -> torch.Tensor:
    return torch.tensor([draw_uniform(seed, index) for index in range(count)], dtype=torch.float64)


@pytest.mark.parametrize("vocab", [VOCAB, 3072])  # a partial last block, and none
def test_draw_frequencies_follow_the_probabilities_across_blocks(vocab):
    probs = torch.zeros(vocab)
    tokens = [0, 5, 1023, 1024, 2047, vocab - 1]  # first and last tokens of blocks, and the vocabulary's last
    probs[tokens] = torch.tensor([0.3, 0.05, 0.15, 0.2, 0.1, 0.2])
    draws = 20000
    drawn = inverse_cdf_draw(probs.expand(draws, vocab), uniforms(draws))
    counts = torch.bincount(drawn, minlength=vocab)
    assert counts.sum() == counts[tokens].sum()  # nothing else drawn
    expected = probs[tokens] * draws
    chi_square = ((counts[tokens] - expected) ** 2 / expected).sum().item()
    assert chi_square < 20.52  # p = 0.001 at 5 degrees of freedom


def test_unnormalised_probabilities_are_drawn_in_proportion():
    probs = torch.tensor([[2.0, 0.0, 6.0]]).expand(8000, 3)
    counts = torch.bincount(inverse_cdf_draw(probs, uniforms(8000, seed=3)), minlength=3)
    assert counts[1] == 0
    assert abs(counts[2] / 8000 - 0.75) < 0.03


@pytest.mark.parametrize("uniform", [0.0, 1 - 2.0**-53])
def test_the_ends_of_the_unit_interval_take_the_first_and_last_tokens_with_mass(uniform):
    probs = torch.zeros(1, VOCAB)
    probs[0, [7, 2500]] = torch.tensor([0.5, 0.5])
    drawn = inverse_cdf_draw(probs, torch.tensor([uniform], dtype=torch.float64)).item()
    assert drawn == (7 if uniform == 0.0 else 2500)


def test_a_token_without_mass_is_never_drawn_where_rounding_overshoots():
    # A block's total is summed in float32 and the tokens inside it in float64: where the first
    # comes out larger, a draw near the end of the block points past its last token with mass.
    torch.manual_seed(0)
    probs = torch.zeros(1, VOCAB)
    probs[0, :1000] = torch.rand(1000)
    assert probs[:, :1024].sum().item() > probs[0, :1024].double().sum().item()
    drawn = inverse_cdf_draw(probs, torch.tensor([1 - 2.0**-53], dtype=torch.float64)).item()
    assert drawn == 999


@pytest.mark.parametrize("row", [torch.full((VOCAB,), float("nan")), torch.zeros(VOCAB)])
def test_a_row_without_any_mass_still_draws_a_token_of_the_vocabulary(row):
    drawn = inverse_cdf_draw(row.unsqueeze(0), torch.tensor([0.5], dtype=torch.float64)).item()
    assert 0 <= drawn < VOCAB


def test_a_row_draws_the_same_token_alone_or_beside_others():
    torch.manual_seed(1)
    probs = torch.rand(6, VOCAB) ** 8
    draws = uniforms(6, seed=9)
    together = inverse_cdf_draw(probs, draws)
    alone = torch.cat([inverse_cdf_draw(probs[row:row + 1], draws[row:row + 1]) for row in range(6)])
    assert torch.equal(together, alone)


def test_uniforms_lie_in_the_unit_interval_and_differ_by_seed_and_counter():
    values = [draw_uniform(seed, index) for seed in range(20) for index in range(50)]
    assert all(0.0 <= value < 1.0 for value in values)
    assert len(set(values)) == len(values)
    assert abs(sum(values) / len(values) - 0.5) < 0.03
