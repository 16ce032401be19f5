"""Thinking models through the engine: a budget ends the thinking at exactly that many tokens, and a
grammar binds only the answer, however the request is scheduled (preempted, speculated, overlapped).

The model is the tiny GLM-4.5-format chat model of tests/thinking_model.py, which opens its thinking
after a generation prompt and never closes it by itself."""
from __future__ import annotations

import json

import jsonschema
import pytest
import torch
from transformers import AutoModelForCausalLM

from autoglm import LLM, SamplingParams
from autoglm.engine.structured_output import OutputPhase
from autoglm.errors import InvalidRequestError
from autoglm.structured_outputs import StructuredOutputsParams
from autoglm.thinking import ThinkingBounds, ThinkingPhase
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.optional_packages import needs_xgrammar
from tests.thinking_model import THINK_END, THINK_START, make_glm45_chat_model
from tests.engine.test_async_scheduling import recorded_plans

# A spent budget is applied as a token bitmask, as a grammar is, with xgrammar's kernel.
pytestmark = needs_xgrammar

BUDGETS = (0, 1, 5, 12)
ANSWER_TOKENS = 6  # generated after the end of the thinking, to see that the answer goes on
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
# Strings, numbers and arrays bounded, so that greedy decoding must close them.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 6},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_glm45_chat_model(tmp_path_factory.mktemp("glm45"))


def make_llm(model_dir, **settings) -> LLM:
    return LLM(model=str(model_dir), dtype="float32", max_context_len=256, block_size=4, **settings)


@pytest.fixture(scope="module")
def llm(model_dir):
    return make_llm(model_dir)


@pytest.fixture(scope="module")
def markers(llm) -> tuple[int, int]:
    tokenizer = llm.get_tokenizer()
    return tokenizer.convert_tokens_to_ids(THINK_START), tokenizer.convert_tokens_to_ids(THINK_END)


def chat_prompt(llm: LLM, enable_thinking: bool = True, generation_prompt: bool = True) -> list[int]:
    """One user turn rendered by the model's chat template (GLM-4.5's), as token ids."""
    tokenizer = llm.get_tokenizer()
    text = tokenizer.apply_chat_template([{"role": "user", "content": "Hello world"}], tokenize=False,
                                         add_generation_prompt=generation_prompt, enable_thinking=enable_thinking)
    return tokenizer.encode(text)


def thinking(markers: tuple[int, int], phase: ThinkingPhase, budget: int | None) -> ThinkingBounds:
    return ThinkingBounds(start_token_id=markers[0], end_token_id=markers[1], phase=phase, budget=budget)


def greedy(max_tokens: int, bounds: ThinkingBounds | None = None, **settings) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, thinking=bounds, **settings)


def token_ids(llm: LLM, prompts: list[list[int]], params: list[SamplingParams]) -> list[list[int]]:
    """Every completion's tokens, request after request."""
    return [c.token_ids for out in llm.generate(prompts, params, use_tqdm=False) for c in out.outputs]


def budgeted_params(markers, phase: ThinkingPhase = ThinkingPhase.NOT_BEGUN) -> list[SamplingParams]:
    """One greedy request per budget, long enough for <think>, the thinking, </think> and ANSWER_TOKENS more."""
    return [greedy(budget + 2 + ANSWER_TOKENS, thinking(markers, phase, budget)) for budget in BUDGETS]


def assert_thinking_then_answer(output: list[int], budget: int, end: int) -> None:
    """``budget`` thinking tokens, the end token, then at least ANSWER_TOKENS of answer."""
    assert output[budget] == end and end not in output[:budget], output
    assert len(output) >= budget + 1 + ANSWER_TOKENS, output


def test_the_model_opens_its_thinking_in_transformers_and_in_the_engine(model_dir, llm, markers):
    prompt = chat_prompt(llm)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    assert int(model(input_ids=torch.tensor([prompt])).logits[0, -1].argmax()) == markers[0]
    (output,) = llm.generate([prompt], greedy(40), use_tqdm=False)
    tokens = output.outputs[0].token_ids
    assert tokens[0] == markers[0] and markers[1] not in tokens, "the thinking should not end by itself"
    assert output.outputs[0].finish_reason == "length"
    assert output.outputs[0].text.startswith(THINK_START), "the markers survive decoding"


def test_a_budget_ends_the_thinking_after_exactly_that_many_tokens(llm, markers):
    prompt = chat_prompt(llm)
    outputs = token_ids(llm, [prompt] * len(BUDGETS), budgeted_params(markers))
    free = token_ids(llm, [prompt], [greedy(1 + max(BUDGETS))])[0]
    for budget, output in zip(BUDGETS, outputs):
        assert output[0] == markers[0]
        assert output[1 : budget + 1] == free[1 : budget + 1], "the thinking itself is not masked"
        assert_thinking_then_answer(output[1:], budget, markers[1])


def test_an_open_thinking_counts_from_the_first_token(llm, markers):
    prompt = chat_prompt(llm) + [markers[0]]
    outputs = token_ids(llm, [prompt] * len(BUDGETS), budgeted_params(markers, ThinkingPhase.OPEN))
    for budget, output in zip(BUDGETS, outputs):
        assert_thinking_then_answer(output, budget, markers[1])


def test_a_closed_thinking_forces_nothing(llm, markers):
    prompt = chat_prompt(llm, enable_thinking=False)
    bounded, free = token_ids(llm, [prompt] * 2, [greedy(20, thinking(markers, ThinkingPhase.CLOSED, 0)), greedy(20)])
    assert bounded == free and markers[1] not in bounded


def test_a_grammar_binds_the_answer_after_a_free_thinking(llm, markers):
    budget = 6
    constraint = StructuredOutputsParams(json=SCHEMA)
    prompt = chat_prompt(llm)
    (output,) = llm.generate([prompt], greedy(200, thinking(markers, ThinkingPhase.NOT_BEGUN, budget),
                                               structured_outputs=constraint), use_tqdm=False)
    completion = output.outputs[0]
    free = token_ids(llm, [prompt], [greedy(budget + 1)])[0]
    assert completion.token_ids[: budget + 2] == free + [markers[1]], "<think>, the free thinking, </think>"
    thought, answer = completion.text.split(THINK_END)
    with pytest.raises(ValueError):
        json.loads(thought.removeprefix(THINK_START))
    jsonschema.validate(json.loads(answer), SCHEMA)
    assert completion.finish_reason == "stop"


def test_a_grammar_binds_the_first_token_when_the_model_does_not_open_its_thinking(llm, markers):
    prompt = chat_prompt(llm, generation_prompt=False)  # no <|assistant|>: the model does not pick <think>
    (output,) = llm.generate([prompt], greedy(200, thinking(markers, ThinkingPhase.NOT_BEGUN, 4),
                                               structured_outputs=StructuredOutputsParams(json=SCHEMA)),
                             use_tqdm=False)
    completion = output.outputs[0]
    assert markers[0] not in completion.token_ids and markers[1] not in completion.token_ids
    jsonschema.validate(json.loads(completion.text), SCHEMA)
    assert completion.finish_reason == "stop"


def test_preemption_and_recompute_keep_the_budgeted_tokens(model_dir, llm, markers):
    prompts = [chat_prompt(llm)] * len(BUDGETS)
    roomy = token_ids(llm, prompts, budgeted_params(markers))
    tight = make_llm(model_dir, kv_cache_memory=kv_bytes_for_blocks(llm, 12))
    assert token_ids(tight, prompts, budgeted_params(markers)) == roomy
    assert tight.engine.scheduler.num_preemptions > 0


def test_speculation_keeps_the_budgeted_tokens(model_dir, llm, markers):
    prompts = [chat_prompt(llm)] * len(BUDGETS)
    speculative = make_llm(model_dir, speculative_config=NGRAM)
    plain = token_ids(llm, prompts, budgeted_params(markers))
    assert token_ids(speculative, prompts, budgeted_params(markers)) == plain
    assert speculative.engine.spec_decode_stats.snapshot().num_accepted_tokens > 0


def test_an_end_token_accepted_mid_draft_starts_the_answer(model_dir, llm, markers):
    """A bias makes the model close its thinking at once; the prompt's earlier turn holds <think></think>, so
    n-gram lookup proposes the end token right after the start token, and the target keeps it."""
    tokenizer = llm.get_tokenizer()
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
             {"role": "user", "content": "Hello world"}]
    prompt = tokenizer.encode(tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True))
    engine = make_llm(model_dir, speculative_config=NGRAM).engine
    params = greedy(8, thinking(markers, ThinkingPhase.NOT_BEGUN, 10), logit_bias={markers[1]: 50.0})
    engine.add_request("r", prompt, params)
    seq = engine.requests["r"].completions[0].seq
    engine.step()  # the prompt, then <think>
    assert seq.output_token_ids == [markers[0]] and seq.constraint.thinking.phase is OutputPhase.THINKING
    engine.step()  # the proposed </think> kept, then the target's own token, now an answer token
    assert seq.output_token_ids == [markers[0], markers[1], markers[1]]
    assert seq.constraint.thinking.phase is OutputPhase.ANSWER and seq.constraint.thinking.num_thinking_tokens == 0
    assert engine.spec_decode_stats.snapshot().num_accepted_tokens == 1


def test_each_of_n_completions_has_its_own_budget(llm, markers):
    budget = 5
    params = SamplingParams(temperature=1.0, seed=3, n=2, max_tokens=budget + 2 + ANSWER_TOKENS,
                            thinking=thinking(markers, ThinkingPhase.NOT_BEGUN, budget))
    first, second = token_ids(llm, [chat_prompt(llm)], [params])
    assert first != second
    for output in (first, second):
        assert output[0] == markers[0]
        assert_thinking_then_answer(output[1:], budget, markers[1])


def test_overlapped_steps_wait_for_the_answer(model_dir, llm, markers):
    """Steps run one at a time until the end token is read, then overlap; the tokens are the plain loop's."""
    budget = 5
    params = greedy(20, thinking(markers, ThinkingPhase.NOT_BEGUN, budget), ignore_eos=True)
    overlapping = make_llm(model_dir, async_scheduling=True)
    plans = recorded_plans(overlapping)
    assert token_ids(overlapping, [chat_prompt(llm)], [params]) == token_ids(llm, [chat_prompt(llm)], [params])
    # Plans 0 to budget + 1 sample <think>, the thinking and </think>; the next is planned once </think> is
    # read, and each one after it overlaps the one before.
    first_overlapped = budget + 3
    assert not any(plan.deferred_positions for plan in plans[:first_overlapped])
    assert plans[first_overlapped:] and all(plan.deferred_positions for plan in plans[first_overlapped:])


@pytest.mark.parametrize("bounds, message", [
    ("budget", "thinking must be a ThinkingBounds or None, got 'budget'"),
    (ThinkingBounds(5, 6, ThinkingPhase.OPEN, budget=-1), "thinking.budget must be an int >= 0 or None, got -1"),
    (ThinkingBounds(5, 6, ThinkingPhase.OPEN, budget=2.5), "thinking.budget must be an int >= 0 or None, got 2.5"),
    (ThinkingBounds(5, 5, ThinkingPhase.OPEN), "thinking.end_token_id must be a token other than "
                                                "thinking.start_token_id (5), got 5"),
    (ThinkingBounds(-1, 6, ThinkingPhase.OPEN), "thinking.start_token_id must be a token id"),
    (ThinkingBounds(5, 6, "open"), "thinking.phase must be ThinkingPhase.OPEN or ThinkingPhase.CLOSED or "
                                   "ThinkingPhase.NOT_BEGUN, got 'open'"),
])
def test_bad_thinking_values_are_refused_naming_them(bounds, message):
    with pytest.raises(InvalidRequestError) as refused:
        SamplingParams(thinking=bounds)
    assert str(refused.value).startswith(message)


def test_thinking_markers_outside_the_vocabulary_are_refused(llm):
    params = SamplingParams(thinking=ThinkingBounds(5, 320, ThinkingPhase.NOT_BEGUN, budget=3))
    with pytest.raises(InvalidRequestError, match=r"thinking.end_token_id must be a token id in \[0, 320\), got 320"):
        llm.engine.add_request("bad", [5, 6], params)
    assert not llm.engine.has_unfinished_requests()
