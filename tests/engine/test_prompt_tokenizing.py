"""What the engine tokenizes: text it is given (never text longer than its context could hold), and
nothing it is given already tokenized."""
from __future__ import annotations

import pytest

from autoglm.engine import input_processor
from autoglm.engine.errors import ContextLengthExceededError
from autoglm.engine.tokenize import PromptCharLimit, TokenizedPrompt
from autoglm.outputs import RequestOutput, add_delta
from autoglm.sampling_params import SamplingParams
from tests.engine.scripted_engine import scripted_engine

MAX_STEPS = 100


def forbid_tokenizing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_, **__) -> list[int]:
        raise AssertionError("the engine tokenized a prompt")

    monkeypatch.setattr(input_processor, "encode_text", refuse)


def run_to_end(engine) -> RequestOutput:
    outputs: dict[str, RequestOutput] = {}
    for _ in range(MAX_STEPS):
        for delta in engine.step():
            add_delta(outputs, delta.request_id, delta)
        if not engine.has_unfinished_requests():
            (output,) = outputs.values()
            return output
    pytest.fail(f"unfinished after {MAX_STEPS} steps")


def test_a_tokenized_prompt_is_taken_as_it_is_and_hands_back_its_text(monkeypatch):
    engine = scripted_engine(num_blocks=64, max_context_len=64)
    token_ids = engine.tokenizer.encode("Hello world")
    forbid_tokenizing(monkeypatch)
    engine.add_request("r", TokenizedPrompt(token_ids, "Hello world"), SamplingParams(max_tokens=3))
    output = run_to_end(engine)
    assert (output.prompt, output.prompt_token_ids) == ("Hello world", token_ids)
    assert len(output.outputs[0].token_ids) == 3


def test_a_tokenized_prompts_ids_are_still_checked(monkeypatch):
    engine = scripted_engine(num_blocks=64, max_context_len=64)
    forbid_tokenizing(monkeypatch)
    with pytest.raises(ValueError, match="prompt: token id 999999 is out of range"):
        engine.add_request("r", TokenizedPrompt([1, 999_999]))
    assert not engine.has_unfinished_requests()


def test_text_longer_than_the_context_could_hold_is_refused_before_it_is_tokenized(monkeypatch):
    engine = scripted_engine(num_blocks=64, max_context_len=64)
    forbid_tokenizing(monkeypatch)
    limit = engine.inputs.prompt_char_limit
    assert limit.max_chars == 64 * limit.chars_per_token
    with pytest.raises(ContextLengthExceededError, match=f"at most {limit.max_chars} characters"):
        engine.add_request("r", "x" * (limit.max_chars + 1))
    assert not engine.has_unfinished_requests()


def test_no_token_stands_for_more_characters_than_the_limit_counts():
    tokenizer = scripted_engine(num_blocks=8).tokenizer
    chars_per_token = PromptCharLimit.of(tokenizer, max_context_len=1).chars_per_token
    assert max(len(tokenizer.decode([token_id])) for token_id in range(len(tokenizer))) <= chars_per_token
