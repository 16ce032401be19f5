"""Stop strings that span tokens, with several sampled choices, streamed and whole over HTTP.

The stop string is taken from a choice's own unstopped text, across the boundary of two of
its tokens, so the server can only find it by matching text that arrived in two steps. A
seeded choice samples the same tokens with or without a stop string, so each choice's expected
text is its unstopped text cut at the first match.
"""
from __future__ import annotations

import pytest

MODEL = "tiny-llama"
PROMPT = "Hello world"
NUM_CHOICES = 3
SAMPLED = {"model": MODEL, "prompt": PROMPT, "max_tokens": 24, "n": NUM_CHOICES, "temperature": 1.0, "seed": 5}

pytestmark = pytest.mark.timeout(60)


def stop_across_a_token_boundary(text: str, token_offsets: list[int]) -> str:
    """Two printable ASCII characters, one each side of a token boundary, found there first in `text`."""
    for boundary in token_offsets[2:]:
        candidate = text[boundary - 1:boundary + 1]
        if len(candidate) == 2 and candidate.isascii() and candidate.isprintable() and \
                text.find(candidate) == boundary - 1:
            return candidate
    raise AssertionError(f"the sampled text {text!r} has no ASCII pair across a token boundary to stop at")


def expected_cut(text: str, stop: str, include_stop: bool) -> tuple[str, str]:
    """A choice's text and finish reason once `stop` ends it."""
    index = text.find(stop)
    if index < 0:
        return text, "length"
    return text[:index + len(stop) if include_stop else index], "stop"


@pytest.fixture(scope="module")
def unstopped(server) -> tuple[list[str], str]:
    """Each choice's text without a stop string, and a stop string that spans two tokens of choice 0."""
    result = server.openai().completions.create(**SAMPLED, logprobs=0, extra_body={"ignore_eos": True})
    choices = sorted(result.choices, key=lambda choice: choice.index)
    texts = [choice.text for choice in choices]
    assert len(set(texts)) == NUM_CHOICES, "the seeded choices should differ"
    return texts, stop_across_a_token_boundary(texts[0], choices[0].logprobs.text_offset)


@pytest.mark.parametrize("include_stop", [False, True])
def test_stop_string_across_tokens_cuts_every_choice_streamed_and_whole(server, unstopped, include_stop):
    texts, stop = unstopped
    extra_body = {"ignore_eos": True, **({"include_stop_str_in_output": True} if include_stop else {})}
    client = server.openai()
    whole = client.completions.create(**SAMPLED, stop=[stop], extra_body=extra_body)
    chunks = list(client.completions.create(**SAMPLED, stop=[stop], stream=True, extra_body=extra_body))

    expected = [expected_cut(text, stop, include_stop) for text in texts]
    assert expected[0][1] == "stop"
    by_index = {choice.index: choice for choice in whole.choices}
    assert [(by_index[i].text, by_index[i].finish_reason) for i in range(NUM_CHOICES)] == expected
    for index, (text, finish_reason) in enumerate(expected):
        pieces = [choice for chunk in chunks for choice in chunk.choices if choice.index == index]
        assert "".join(piece.text for piece in pieces) == text
        assert [piece.finish_reason for piece in pieces if piece.finish_reason] == [finish_reason]
