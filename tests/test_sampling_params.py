import pytest

from autoglm.sampling_params import SamplingParams

TOKEN_ID_LIST = "a list of token ids (ints in [0, 2**63 - 1]) or None"
LOGIT_BIAS = "a dict of token id (int >= 0) to bias (a number in [-100, 100]) or None"


def test_defaults_match_vllm():
    params = SamplingParams()
    assert (params.n, params.temperature, params.top_p, params.top_k, params.min_p) == (1, 1.0, 1.0, 0, 0.0)
    assert (params.presence_penalty, params.frequency_penalty, params.repetition_penalty) == (0.0, 0.0, 1.0)
    assert (params.max_tokens, params.min_tokens) == (16, 0)
    assert params.logprobs is None and params.prompt_logprobs is None
    assert params.seed is None and not params.ignore_eos
    assert params.skip_special_tokens and not params.include_stop_str_in_output
    assert params.stop == [] and params.stop_token_ids == [] and params.logit_bias == {}


def test_stop_is_normalised_to_a_list():
    assert SamplingParams(stop="\n\n").stop == ["\n\n"]
    assert SamplingParams(stop=["a", "bc"]).stop == ["a", "bc"]
    assert SamplingParams(stop_token_ids=[2, 7]).stop_token_ids == [2, 7]


@pytest.mark.parametrize(
    "temperature, greedy", [(0.0, True), (1e-6, True), (1e-5, False), (0.7, False), (2.0, False)]
)
def test_greedy_below_tiny_temperature(temperature, greedy):
    assert SamplingParams(temperature=temperature).greedy is greedy


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 0}, "n must be in [1, 16], got 0"),
        ({"n": 17}, "n must be in [1, 16], got 17"),
        ({"temperature": -1}, "temperature must be in [0, 2], got -1"),
        ({"temperature": 2.5}, "temperature must be in [0, 2], got 2.5"),
        ({"temperature": float("nan")}, "temperature must be in [0, 2], got nan"),
        ({"top_p": 0}, "top_p must be in (0, 1], got 0"),
        ({"top_p": 1.1}, "top_p must be in (0, 1], got 1.1"),
        ({"top_k": -2}, "top_k must be -1, 0 (disabled) or in [1, 2**63 - 1], got -2"),
        ({"top_k": 2**63}, f"top_k must be -1, 0 (disabled) or in [1, 2**63 - 1], got {2**63}"),
        ({"stop_token_ids": [2**63]}, f"stop_token_ids must be {TOKEN_ID_LIST}, got [{2**63}]"),
        ({"min_p": -0.1}, "min_p must be in [0, 1], got -0.1"),
        ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5"),
        ({"presence_penalty": -2.1}, "presence_penalty must be in [-2, 2], got -2.1"),
        ({"presence_penalty": 3}, "presence_penalty must be in [-2, 2], got 3"),
        ({"frequency_penalty": 2.5}, "frequency_penalty must be in [-2, 2], got 2.5"),
        ({"repetition_penalty": 0}, "repetition_penalty must be in (0, 2], got 0"),
        ({"repetition_penalty": 2.01}, "repetition_penalty must be in (0, 2], got 2.01"),
        ({"max_tokens": 0}, "max_tokens must be >= 1 or None, got 0"),
        ({"min_tokens": -1}, "min_tokens must be in [0, max_tokens=16], got -1"),
        ({"min_tokens": 5, "max_tokens": 4}, "min_tokens must be in [0, max_tokens=4], got 5"),
        ({"min_tokens": -1, "max_tokens": None}, "min_tokens must be >= 0, got -1"),
        ({"logprobs": -1}, "logprobs must be in [0, 20] or None, got -1"),
        ({"logprobs": 21}, "logprobs must be in [0, 20] or None, got 21"),
        ({"prompt_logprobs": 21}, "prompt_logprobs must be in [0, 20] or None, got 21"),
        ({"seed": 2**64}, "seed must be in [-2**63, 2**64 - 1], got 18446744073709551616"),
        ({"seed": 1.5}, "seed must be an int or None, got 1.5"),
        ({"seed": True}, "seed must be an int or None, got True"),
        ({"n": 2.0}, "n must be an int, got 2.0"),
        ({"top_k": "5"}, "top_k must be an int, got '5'"),
        ({"temperature": "hot"}, "temperature must be a number, got 'hot'"),
        ({"max_tokens": 1.0}, "max_tokens must be an int or None, got 1.0"),
        ({"ignore_eos": 1}, "ignore_eos must be a bool, got 1"),
        ({"stop": ""}, "stop must be made of non-empty strings, got ''"),
        ({"stop": ["ok", ""]}, "stop must be made of non-empty strings, got ['ok', '']"),
        ({"stop": ["ok", 3]}, "stop must be made of non-empty strings, got ['ok', 3]"),
        ({"stop": 3}, "stop must be a string, a list of strings or None, got 3"),
        ({"stop_token_ids": [1, -2]}, f"stop_token_ids must be {TOKEN_ID_LIST}, got [1, -2]"),
        ({"stop_token_ids": 5}, f"stop_token_ids must be {TOKEN_ID_LIST}, got 5"),
        ({"logit_bias": {3: 100.5}}, f"logit_bias must be {LOGIT_BIAS}, got {{3: 100.5}}"),
        ({"logit_bias": {3: -101}}, f"logit_bias must be {LOGIT_BIAS}, got {{3: -101}}"),
        ({"logit_bias": {3: float("nan")}}, f"logit_bias must be {LOGIT_BIAS}, got {{3: nan}}"),
        ({"logit_bias": {3: True}}, f"logit_bias must be {LOGIT_BIAS}, got {{3: True}}"),
        ({"logit_bias": {-1: 5}}, f"logit_bias must be {LOGIT_BIAS}, got {{-1: 5}}"),
        ({"logit_bias": {"3": 5}}, f"logit_bias must be {LOGIT_BIAS}, got {{'3': 5}}"),
        ({"logit_bias": [3]}, f"logit_bias must be {LOGIT_BIAS}, got [3]"),
    ],
)
def test_bad_values_are_rejected_with_name_and_range(kwargs, message):
    with pytest.raises(ValueError) as error:
        SamplingParams(**kwargs)
    assert str(error.value) == message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": 0}, {"temperature": 2}, {"top_p": 1e-3}, {"top_k": -1}, {"top_k": 1}, {"min_p": 1},
        {"presence_penalty": -2}, {"frequency_penalty": 2}, {"repetition_penalty": 2}, {"max_tokens": None},
        {"min_tokens": 16}, {"logprobs": 0}, {"prompt_logprobs": 20}, {"seed": -(2**63)}, {"n": 16},
        {"logit_bias": {0: -100.0, 7: 100.0}},
    ],
)
def test_boundary_values_are_accepted(kwargs):
    params = SamplingParams(**kwargs)
    for name, value in kwargs.items():
        assert getattr(params, name) == value


def test_logit_bias_becomes_a_dict_of_floats_and_its_token_ids_are_checked_against_the_vocab():
    params = SamplingParams(logit_bias={5: 2, 9: -100})
    assert params.logit_bias == {5: 2.0, 9: -100.0}
    params.check_vocab(10)
    with pytest.raises(ValueError) as error:
        params.check_vocab(9)
    assert str(error.value) == "logit_bias must be keyed by token ids in [0, 9), got 9"
