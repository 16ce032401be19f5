"""Error messages quote a caller's bad value by a short prefix, however large the value."""
from __future__ import annotations

import pytest

from autoglm.errors import MAX_QUOTED_CHARS, InvalidRequestError, quote_value
from autoglm.sampling_params import SamplingParams

MEGABYTE = 1 << 20


@pytest.mark.parametrize("value", ["a stop", 42, [1, 2, 3], {"7": 1.5}, None])
def test_a_small_value_is_quoted_whole_as_its_repr(value):
    assert quote_value(value) == repr(value)


def test_a_long_string_is_quoted_by_its_prefix():
    quoted = quote_value("abc" * MEGABYTE)
    assert quoted == repr(("abc" * MAX_QUOTED_CHARS)[:MAX_QUOTED_CHARS]) + "..."


@pytest.mark.parametrize("value", [
    ["x" * MEGABYTE, ""],
    list(range(MEGABYTE)),
    {index: "y" * 1000 for index in range(1000)},
])
def test_any_large_value_is_quoted_in_a_few_characters(value):
    quoted = quote_value(value)
    assert len(quoted) <= MAX_QUOTED_CHARS + len("...")
    assert quoted[:2] == repr(value)[:2]


@pytest.mark.parametrize("value", [10**5000, -(10**5000), [10**5000]], ids=["positive", "negative", "nested"])
def test_an_integer_too_long_for_repr_is_quoted_by_its_size(value):
    assert "16610-bit integer>" in quote_value(value)


def test_a_bad_sampling_parameter_quotes_a_prefix_of_its_value():
    with pytest.raises(InvalidRequestError) as refused:
        SamplingParams(stop=["x" * MEGABYTE, ""])
    message = str(refused.value)
    assert message.startswith("stop must be made of non-empty strings, got ['xxxx")
    assert len(message) < 200
