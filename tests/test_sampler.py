import math

import pytest
import torch

from autoglm.engine.plan_builder import row_sampling
from autoglm.engine.sequence import Sequence
from autoglm.runner.sampler import Sampler, SamplingBatch
from autoglm.sampling_params import SamplingParams
from tests.optional_packages import needs_xgrammar

CPU = torch.device("cpu")
# Five tokens with probabilities a hand can add up: sorted, 0.5, 0.3, 0.1, 0.05, 0.05.
PROBS = [0.05, 0.5, 0.3, 0.1, 0.05]
LOGITS = [math.log(p) for p in PROBS]
EVERY_TOKEN = {0, 1, 2, 3, 4}
DRAWS = 4000
# An output where token 1 occurs twice and token 2 once.
REPEATS = [1, 2, 1]


def build(params, prompts=None, outputs=None, eos_token_ids=(), vocab_size=5, token_bitmask=None):
    """The sampling batch of rows with these settings and histories, as the engine plans them."""
    rows = len(params)
    prompts, outputs = prompts or [[] for _ in range(rows)], outputs or [[] for _ in range(rows)]
    seqs = [Sequence(request_id="r", index=0, token_ids=prompt + output, num_prompt_tokens=len(prompt), params=p,
                     max_tokens=16, arrival_time=0.0, seed=sequence_seed(p))
            for p, prompt, output in zip(params, prompts, outputs)]
    return SamplingBatch.build([row_sampling(seq, set(eos_token_ids)) for seq in seqs], vocab_size, CPU,
                               token_bitmask)


def sequence_seed(params: SamplingParams) -> int:
    """As the engine gives it: the request's seed, else a fresh one (here from torch's RNG, which each test seeds)."""
    return params.seed if params.seed is not None else int(torch.randint(2**62, ()))


def token_counts(logits_row, params, **build_kwargs):
    """How often each token is drawn over DRAWS identical rows sampled in one call."""
    torch.manual_seed(1234)
    logits = torch.tensor([logits_row] * DRAWS)
    batch = build([params] * DRAWS, **build_kwargs)
    token_ids = Sampler()(logits, batch).token_ids
    return torch.bincount(token_ids, minlength=logits.shape[1]).tolist()


def kept_tokens(logits_row, params, **build_kwargs):
    return {token for token, count in enumerate(token_counts(logits_row, params, **build_kwargs)) if count}


def greedy_tokens(logits_rows, params, prompt=(), output=()):
    """Greedy picks of rows that share one request's history."""
    rows = len(logits_rows)
    batch = build([params] * rows, [list(prompt)] * rows, [list(output)] * rows)
    return Sampler()(torch.tensor(logits_rows), batch).token_ids.tolist()


def test_greedy_takes_the_argmax_and_skips_every_stage():
    torch.manual_seed(0)
    logits = torch.randn(6, 50)
    batch = build([SamplingParams(temperature=0)] * 6, vocab_size=50)
    assert batch.all_greedy
    stages = (batch.temperature, batch.top_k, batch.top_p, batch.min_p, batch.repetition_penalty,
              batch.frequency_penalty, batch.presence_penalty, batch.min_tokens_ban)
    assert all(stage is None for stage in stages)
    assert torch.equal(Sampler()(logits, batch).token_ids, logits.argmax(dim=-1))


def test_greedy_rows_beside_random_rows_still_take_the_argmax():
    torch.manual_seed(0)
    logits = torch.randn(4, 50)
    params = [SamplingParams(temperature=0), SamplingParams(top_k=3), SamplingParams(temperature=0),
              SamplingParams(temperature=1.5)]
    token_ids = Sampler()(logits, build(params, vocab_size=50)).token_ids
    assert token_ids[0] == logits[0].argmax() and token_ids[2] == logits[2].argmax()


def test_logprobs_come_from_the_raw_logits_whatever_the_settings():
    torch.manual_seed(0)
    logits = torch.randn(3, 50) * 3
    params = [SamplingParams(temperature=0.5, top_k=5, repetition_penalty=1.5, logprobs=2),
              SamplingParams(temperature=0, frequency_penalty=1.0),
              SamplingParams(top_p=0.5, min_p=0.2, logprobs=4)]
    batch = build(params, prompts=[[1, 2], [3], [4]], outputs=[[5], [6, 6], [7]], vocab_size=50)
    out = Sampler()(logits, batch)
    raw = torch.log_softmax(logits, dim=-1)
    assert out.logprobs.dtype == torch.float32
    assert torch.allclose(out.logprobs, raw.gather(1, out.token_ids.unsqueeze(1)).squeeze(1))
    expected_values, expected_ids = raw.topk(4, dim=-1)
    assert torch.equal(out.top_token_ids, expected_ids)
    assert torch.allclose(out.top_logprobs, expected_values)
    assert torch.all(out.top_logprobs[:, :-1] >= out.top_logprobs[:, 1:])


def test_top_logprobs_are_absent_when_no_row_asks_and_capped_at_the_vocab():
    logits = torch.tensor([LOGITS])
    unasked = Sampler()(logits, build([SamplingParams()]))
    assert unasked.top_logprobs is None and unasked.logprobs is None
    out = Sampler()(logits, build([SamplingParams(logprobs=20)]))
    ranked = out.top_token_ids[0].tolist()
    assert ranked[:3] == [1, 2, 3] and set(ranked[3:]) == {0, 4}  # tokens 0 and 4 tie
    assert torch.allclose(out.top_logprobs.exp().sum(), torch.tensor(1.0))


@pytest.mark.parametrize(
    "top_k, kept",
    [(1, {1}), (2, {1, 2}), (3, {1, 2, 3}), (0, EVERY_TOKEN), (-1, EVERY_TOKEN), (50, EVERY_TOKEN)],
)
def test_top_k_keeps_the_k_most_likely(top_k, kept):
    assert kept_tokens(LOGITS, SamplingParams(top_k=top_k)) == kept


@pytest.mark.parametrize("top_p, kept", [(0.3, {1}), (0.75, {1, 2}), (0.85, {1, 2, 3}), (1.0, EVERY_TOKEN)])
def test_top_p_keeps_the_smallest_set_reaching_p(top_p, kept):
    assert kept_tokens(LOGITS, SamplingParams(top_p=top_p)) == kept


@pytest.mark.parametrize("top_p", [5e-324, 1e-320, 1e-46])
def test_a_top_p_that_rounds_to_zero_in_float32_keeps_the_likeliest_token(top_p):
    assert kept_tokens(LOGITS, SamplingParams(top_p=top_p)) == {1}
    assert kept_tokens(LOGITS, SamplingParams(top_p=top_p, top_k=3)) == {1}


@pytest.mark.parametrize("penalty", [1e-300, 1e-40])
def test_a_repetition_penalty_too_small_for_float32_boosts_seen_tokens_to_the_top(penalty):
    """Dividing by a penalty that rounds to 0 or a denormal overflows float32: the seen positive
    tokens become the likeliest instead of making the row's probabilities NaN."""
    logits = [2.0, 2.5, 0.5, -1.0, 2.0]
    params = SamplingParams(repetition_penalty=penalty)
    assert kept_tokens(logits, params, prompts=[[0, 4]] * DRAWS) == {0, 4}
    assert kept_tokens(logits, SamplingParams(repetition_penalty=penalty, temperature=1e-5),
                       prompts=[[2]] * DRAWS) == {2}


def test_a_min_tokens_ban_of_every_token_is_lifted_rather_than_leaving_nothing_to_draw():
    every_token = list(EVERY_TOKEN)
    params = SamplingParams(min_tokens=2, stop_token_ids=every_token)
    assert kept_tokens(LOGITS, params, outputs=[[1]] * DRAWS) == EVERY_TOKEN
    greedy = SamplingParams(temperature=0, min_tokens=2, stop_token_ids=every_token)
    assert greedy_tokens([LOGITS], greedy, output=[1]) == [1]


def test_top_p_applies_to_the_distribution_left_by_top_k():
    # After top_k=3 the probabilities are 0.556, 0.333, 0.111: 0.85 is reached by two tokens.
    assert kept_tokens(LOGITS, SamplingParams(top_p=0.85)) == {1, 2, 3}
    assert kept_tokens(LOGITS, SamplingParams(top_k=3, top_p=0.85)) == {1, 2}


def test_temperature_applies_before_top_p():
    # At temperature 0.5 the top token's probability grows from 0.5 to 0.704, alone reaching 0.7.
    assert kept_tokens(LOGITS, SamplingParams(top_p=0.7)) == {1, 2}
    assert kept_tokens(LOGITS, SamplingParams(temperature=0.5, top_p=0.7)) == {1}


@pytest.mark.parametrize("min_p, kept", [(0.25, {1, 2}), (0.15, {1, 2, 3}), (0.7, {1}), (0.0, EVERY_TOKEN)])
def test_min_p_drops_tokens_below_a_fraction_of_the_top_probability(min_p, kept):
    assert kept_tokens(LOGITS, SamplingParams(min_p=min_p)) == kept


@pytest.mark.parametrize("temperature", [1.0, 2.0, 0.5])
def test_sampling_frequencies_follow_the_tempered_softmax(temperature):
    counts = torch.tensor(token_counts(LOGITS, SamplingParams(temperature=temperature)), dtype=torch.float32)
    expected = torch.softmax(torch.tensor(LOGITS) / temperature, dim=-1)
    assert torch.allclose(counts / DRAWS, expected, atol=0.03)


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens():
    params = SamplingParams(temperature=0, repetition_penalty=2.0)
    # Token 0 (in the prompt) falls from 2.0 to 1.0.
    assert greedy_tokens([[2.0, 0.9, -9, -9, -9], [2.0, 1.1, -9, -9, -9]], params, prompt=[0]) == [0, 1]
    # Token 2 (in the output) falls from -1.0 to -2.0.
    assert greedy_tokens([[-9, -9, -1.0, -1.9, -9], [-9, -9, -1.0, -2.1, -9]], params, output=[2]) == [3, 2]
    # Unseen tokens keep their logits.
    assert greedy_tokens([[1.9, -9, -9, 2.0, -9]], params, prompt=[0]) == [3]


def test_frequency_penalty_scales_with_the_count_in_the_output():
    params = SamplingParams(temperature=0, frequency_penalty=0.5)
    # Token 1 occurs twice in the output: 2.2 - 1.0 = 1.2; token 2 once: 1.7 - 0.5 = 1.2.
    assert greedy_tokens([[1.25, 2.2, -9, -9, -9], [1.15, 2.2, -9, -9, -9]], params, output=REPEATS) == [0, 1]
    assert greedy_tokens([[1.25, -9, 1.7, -9, -9], [1.15, -9, 1.7, -9, -9]], params, output=REPEATS) == [0, 2]
    # Prompt tokens are not counted.
    assert greedy_tokens([[1.9, -9, -9, 2.0, -9]], params, prompt=[3, 3], output=[1]) == [3]


def test_presence_penalty_is_the_same_for_any_positive_count():
    params = SamplingParams(temperature=0, presence_penalty=0.5)
    # Tokens 1 (twice) and 2 (once) both lose 0.5.
    assert greedy_tokens([[1.65, 2.2, -9, -9, -9], [1.75, 2.2, -9, -9, -9]], params, output=REPEATS) == [1, 0]
    assert greedy_tokens([[1.15, -9, 1.7, -9, -9], [1.25, -9, 1.7, -9, -9]], params, output=REPEATS) == [2, 0]


def test_negative_frequency_penalty_encourages_repeats():
    params = SamplingParams(temperature=0, frequency_penalty=-1.0)
    assert greedy_tokens([[2.0, 1.5, -9, -9, -9]], params, output=[1]) == [1]


def test_min_tokens_bans_eos_and_stop_tokens_until_reached():
    logits = [0.0, 0.0, 1.0, 5.0, 5.0]
    params = SamplingParams(temperature=0, min_tokens=2, stop_token_ids=[3, 99], ignore_eos=True)
    short = build([params], outputs=[[1]], eos_token_ids={4})
    assert Sampler()(torch.tensor([logits]), short).token_ids.tolist() == [2]
    reached = build([params], outputs=[[1, 1]], eos_token_ids={4})
    assert Sampler()(torch.tensor([logits]), reached).token_ids.tolist() == [3]
    sampled = SamplingParams(min_tokens=2, stop_token_ids=[3])
    assert kept_tokens(logits, sampled, outputs=[[1]] * DRAWS, eos_token_ids={4}) == {0, 1, 2}


def test_seeded_row_draws_the_same_tokens_alone_or_in_any_batch():
    torch.manual_seed(0)
    row_logits = torch.randn(20, 50)

    def run(neighbours: int, seed: int) -> list[int]:
        """The seeded row's tokens over 20 steps, placed in the middle of random top-k rows."""
        position = neighbours // 2
        rows = [SamplingParams(top_k=10)] * neighbours
        rows.insert(position, SamplingParams(temperature=1.0, top_p=0.95, seed=seed))
        tokens = []
        for step in range(20):
            outputs = [[] for _ in rows]
            outputs[position] = list(tokens)  # the row's draw index is its output length
            batch = build(rows, outputs=outputs, vocab_size=50)
            logits = torch.randn(neighbours + 1, 50)
            logits[position] = row_logits[step]
            tokens.append(Sampler()(logits, batch).token_ids[position].item())
        return tokens

    alone = run(0, seed=7)
    assert run(5, seed=7) == alone
    assert run(2, seed=7) == alone
    assert run(0, seed=8) != alone


def test_rows_sharing_a_seed_draw_the_same_tokens():
    logits = torch.randn(1, 50).repeat(3, 1)
    batch = build([SamplingParams(seed=3), SamplingParams(), SamplingParams(seed=3)], vocab_size=50)
    token_ids = Sampler()(logits, batch).token_ids
    assert token_ids[0] == token_ids[2]


def test_mismatched_shapes_are_rejected():
    batch = build([SamplingParams()] * 2)
    expected = r"logits must have shape \[2, 5\] to match the sampling batch, got \[2, 6\]"
    with pytest.raises(ValueError, match=expected):
        Sampler()(torch.zeros(2, 6), batch)


def test_logit_bias_shifts_each_rows_own_tokens_before_greedy_and_random_picks():
    # Row 0 bans its argmax (token 1) and lifts token 3 above token 2; row 1 forces token 0; row 2 has none.
    params = [
        SamplingParams(temperature=0, logit_bias={1: -100, 3: 1.2}),
        SamplingParams(temperature=1.0, logit_bias={0: 100}),
        SamplingParams(temperature=0),
    ]
    batch = build(params)
    output = Sampler()(torch.tensor([LOGITS] * 3), batch)
    assert output.token_ids.tolist() == [3, 0, 1]
    assert kept_tokens(LOGITS, SamplingParams(logit_bias={4: 100})) == {4}
    assert kept_tokens(LOGITS, SamplingParams(top_k=1, logit_bias={1: -100, 2: -100})) == {3}


def test_logit_bias_applies_before_penalties_and_leaves_logprobs_raw():
    # Token 2 (in the prompt) is biased from -1.2 to 1.8, then the repetition penalty halves it to 0.9, past
    # token 1's 0.8; penalised first (-2.4), the bias would only lift it to 0.6.
    params = SamplingParams(temperature=0, logit_bias={2: 3.0}, repetition_penalty=2.0, logprobs=1)
    logits = torch.tensor([[0.0, 0.8, -1.2, -1.0, -1.0]])
    output = Sampler()(logits, build([params], prompts=[[2]]))
    assert output.token_ids.tolist() == [2]
    raw = logits.log_softmax(dim=-1)
    assert output.logprobs.tolist() == pytest.approx(raw[0, [2]].tolist())
    assert output.top_token_ids.tolist() == [[1]]


def test_no_row_with_logit_bias_skips_the_stage():
    assert build([SamplingParams(), SamplingParams(temperature=0)]).logit_bias is None


def test_seeded_draws_differ_from_step_to_step():
    logits = torch.zeros(1, 1000)
    draws = [Sampler()(logits, build([SamplingParams(seed=5)], outputs=[[0] * step], vocab_size=1000)).token_ids.item()
             for step in range(4)]
    assert len(set(draws)) > 1


def test_ranks_of_sampled_tokens_match_a_full_log_softmax():
    torch.manual_seed(0)
    logits = torch.randn(8, 300)
    logits[:, 7] = logits[:, 8]  # a tie: both share a rank
    params = [SamplingParams(temperature=t, logprobs=2) for t in (0, 0.5, 1.0, 2.0)] * 2
    output = Sampler()(logits, build(params, vocab_size=300))
    raw = torch.log_softmax(logits, dim=-1)
    chosen = raw.gather(1, output.token_ids.unsqueeze(1))
    assert torch.equal(output.ranks, (raw > chosen).sum(dim=-1) + 1)
    forced = Sampler()(logits[:1], build([SamplingParams(logit_bias={8: 100}, logprobs=0)], vocab_size=300))
    assert forced.token_ids.item() == 8 and forced.ranks.item() == (raw[0] > raw[0, 8]).sum().item() + 1


def bitmask(allowed_per_row: list[set[int] | None], vocab_size: int) -> torch.Tensor:
    """The plan's int32 bitmask: token t at bit t % 32 of word t // 32; None rows allow every token."""
    words = torch.zeros(len(allowed_per_row), -(-vocab_size // 32), dtype=torch.int64)
    for row, allowed in enumerate(allowed_per_row):
        for token in range(vocab_size) if allowed is None else allowed:
            words[row, token // 32] |= 1 << (token % 32)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)  # the same bits as int32


@needs_xgrammar
def test_a_grammar_bitmask_limits_greedy_and_random_rows_to_its_tokens():
    vocab = 70  # three words; token 31 is an int32's sign bit, 64 and 69 sit in a partial last word
    allowed = {3, 31, 64, 69}
    torch.manual_seed(0)
    logits = torch.randn(4, vocab)
    params = [SamplingParams(temperature=0), SamplingParams(temperature=1.0, seed=5)] * 2
    picked = Sampler()(logits, build(params, vocab_size=vocab,
                                     token_bitmask=bitmask([allowed, allowed, None, None], vocab))).token_ids.tolist()
    free = Sampler()(logits, build(params, vocab_size=vocab)).token_ids.tolist()
    assert picked[0] == max(allowed, key=lambda token: logits[0, token])
    assert picked[1] in allowed
    assert picked[2:] == free[2:], "rows whose mask allows everything pick as if there were no mask"


@needs_xgrammar
def test_every_token_a_grammar_allows_can_be_drawn_and_no_other():
    allowed = {0, 2, 4}
    params = [SamplingParams(temperature=1.0, seed=seed) for seed in range(DRAWS)]
    batch = build(params, token_bitmask=bitmask([allowed] * DRAWS, len(LOGITS)))
    assert set(Sampler()(torch.tensor([LOGITS] * DRAWS), batch).token_ids.tolist()) == allowed


@needs_xgrammar
def test_logprobs_under_a_grammar_stay_those_of_the_raw_logits():
    batch = build([SamplingParams(temperature=0, logprobs=2)], token_bitmask=bitmask([{3}], len(LOGITS)))
    out = Sampler()(torch.tensor([LOGITS]), batch)
    assert out.token_ids.tolist() == [3]
    assert out.logprobs.tolist() == pytest.approx([math.log(PROBS[3])], abs=1e-6)
    assert out.top_token_ids.tolist() == [[1, 2]]  # the model's own favourites, masked or not
