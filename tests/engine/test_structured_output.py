"""Constrained requests through the engine: a tiny random model, whose free output is noise, still
writes text that parses and validates, every time, however the request is scheduled."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest

from autoglm import LLM, SamplingParams
from autoglm.errors import InvalidRequestError
from autoglm.outputs import RequestOutput, add_delta
from autoglm.sampling_params import RequestOutputKind
from autoglm.structured_outputs import StructuredOutputsParams
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.optional_packages import needs_xgrammar
from tests.tiny_models import make_tiny_checkpoint

pytestmark = needs_xgrammar

NUM_REQUESTS = 50
MAX_TOKENS = 200
# Strings and arrays are bounded, so even a model that never chooses to close them must.
NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "score": {"type": "number", "minimum": -1.5, "maximum": 2.5},
        "colour": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 4}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string", "maxLength": 6},
                           "zip": {"type": "integer", "minimum": 10000, "maximum": 99999}},
            "required": ["street", "zip"],
        },
    },
    "required": ["name", "age", "colour", "tags", "address"],
}
REGEX = r"[a-z]{2,6}@[0-9]{2,3}\.(com|org)"
CHOICES = ["yes", "no", 'say "maybe"', "ünïcode"]
EBNF = 'root ::= "[" item ("," item){0,3} "]"\nitem ::= [a-c] | [0-9]{1,2}'
EBNF_AS_REGEX = r"\[([a-c]|[0-9]{1,2})(,([a-c]|[0-9]{1,2})){0,3}\]"


def is_valid_nested(text: str) -> bool:
    jsonschema.validate(json.loads(text), NESTED_SCHEMA)
    return True


def is_json_object(text: str) -> bool:
    return isinstance(json.loads(text), dict)


CASES = {
    "json": (StructuredOutputsParams(json=NESTED_SCHEMA), is_valid_nested),
    "json_object": (StructuredOutputsParams(json_object=True), is_json_object),
    "regex": (StructuredOutputsParams(regex=REGEX), lambda text: re.fullmatch(REGEX, text) is not None),
    "choice": (StructuredOutputsParams(choice=CHOICES), lambda text: text in CHOICES),
    "grammar": (StructuredOutputsParams(grammar=EBNF), lambda text: re.fullmatch(EBNF_AS_REGEX, text) is not None),
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))


@pytest.fixture(scope="module")
def llm(model_dir):
    return LLM(model=str(model_dir), dtype="float32", max_context_len=512, block_size=4)


def sampled(constraint: StructuredOutputsParams, seed: int, max_tokens: int = MAX_TOKENS,
            **settings) -> SamplingParams:
    return SamplingParams(temperature=1.0, seed=seed, max_tokens=max_tokens, structured_outputs=constraint,
                          **settings)


def generate(llm: LLM, params: list[SamplingParams], prompt: str = "Hello world") -> list[RequestOutput]:
    return llm.generate([prompt] * len(params), params, use_tqdm=False)


@pytest.mark.parametrize("kind", [kind for kind in CASES if kind != "json_object"])
def test_every_seeded_sampled_output_matches_its_constraint(llm, kind):
    constraint, is_valid = CASES[kind]
    outputs = [out.outputs[0] for out in generate(llm, [sampled(constraint, seed) for seed in range(NUM_REQUESTS)])]
    for completion in outputs:
        assert completion.finish_reason == "stop", completion.text
        assert is_valid(completion.text), completion.text
    assert len({completion.text for completion in outputs}) > 1, "the draws should differ"


def test_any_json_object_parses_once_complete(llm):
    """Any object may hold an unbounded string, which a random model need not close: those run
    to max_tokens; every one that ends is an object."""
    constraint, is_valid = CASES["json_object"]
    outputs = [out.outputs[0] for out in generate(llm, [sampled(constraint, seed) for seed in range(NUM_REQUESTS)])]
    complete = [completion.text for completion in outputs if completion.finish_reason == "stop"]
    assert complete and all(is_valid(text) for text in complete), complete
    assert all(completion.text.startswith("{") for completion in outputs)


def test_the_free_model_writes_noise(llm):
    """What the cases above constrain: unconstrained, the same requests parse as nothing."""
    free = generate(llm, [SamplingParams(temperature=1.0, seed=seed, max_tokens=40) for seed in range(10)])
    for out in free:
        with pytest.raises(ValueError):
            json.loads(out.outputs[0].text)


def test_greedy_requests_are_constrained_too(llm):
    (out,) = generate(llm, [SamplingParams(temperature=0, max_tokens=MAX_TOKENS,
                                           structured_outputs=StructuredOutputsParams(regex=REGEX))])
    assert re.fullmatch(REGEX, out.outputs[0].text)


def test_max_tokens_cuts_a_constrained_output_with_finish_reason_length(llm):
    (out,) = generate(llm, [sampled(StructuredOutputsParams(regex="[a-z]{50}"), seed=1, max_tokens=5)])
    assert out.outputs[0].finish_reason == "length"
    assert len(out.outputs[0].token_ids) == 5 and re.fullmatch("[a-z]+", out.outputs[0].text)


def test_a_complete_grammar_ends_the_request_despite_ignore_eos_and_min_tokens(llm):
    choice = StructuredOutputsParams(choice=CHOICES)
    outs = generate(llm, [sampled(choice, seed=3, ignore_eos=True), sampled(choice, seed=3, min_tokens=50)])
    for out in outs:
        assert out.outputs[0].finish_reason == "stop" and out.outputs[0].text in CHOICES


def test_each_of_n_completions_follows_its_own_grammar_state(llm):
    constraint, is_valid = CASES["json"]
    (out,) = generate(llm, [sampled(constraint, seed=7, n=4)])
    texts = [completion.text for completion in out.outputs]
    assert len(texts) == 4 and all(is_valid(text) for text in texts)
    assert len(set(texts)) > 1


def test_deltas_add_up_to_the_whole_output(llm):
    constraint, is_valid = CASES["json"]
    whole = generate(llm, [sampled(constraint, seed) for seed in range(4)])
    engine = llm.engine
    for seed in range(4):
        engine.add_request(f"delta-{seed}", "Hello world", sampled(constraint, seed))
    outputs: dict[str, RequestOutput] = {}
    while engine.has_unfinished_requests():
        for delta in engine.step():
            add_delta(outputs, delta.request_id, delta)
        engine.wait_for_work()
    assert [outputs[f"delta-{seed}"].outputs[0].text for seed in range(4)] == [o.outputs[0].text for o in whole]
    assert all(is_valid(out.outputs[0].text) for out in whole)
    assert sampled(constraint, 0).output_kind is RequestOutputKind.DELTA


def test_a_constrained_row_leaves_the_unconstrained_rows_beside_it_unchanged(llm):
    free = SamplingParams(temperature=1.0, seed=99, max_tokens=30, ignore_eos=True)
    (alone,) = generate(llm, [free])
    crowd = generate(llm, [sampled(CASES["json"][0], 1), free, sampled(CASES["regex"][0], 2)])
    assert crowd[1].outputs[0].token_ids == alone.outputs[0].token_ids


def test_preemption_and_recompute_give_the_same_constrained_output(model_dir, llm):
    constraint, is_valid = CASES["json"]
    params = [sampled(constraint, seed) for seed in range(6)]
    roomy = generate(llm, params)
    tight = LLM(model=str(model_dir), dtype="float32", max_context_len=512, block_size=4,
                kv_cache_memory=kv_bytes_for_blocks(llm, 60))
    squeezed = generate(tight, params)
    assert tight.engine.scheduler.num_preemptions > 0
    assert [o.outputs[0].token_ids for o in squeezed] == [o.outputs[0].token_ids for o in roomy]
    assert all(is_valid(o.outputs[0].text) for o in squeezed)


@pytest.mark.parametrize("constraint, param, reason", [
    (StructuredOutputsParams(json={"type": "nosuch"}), "structured_outputs.json", 'Unsupported type "nosuch"'),
    (StructuredOutputsParams(regex="a(b"), "structured_outputs.regex", "parenthesis is not closed"),
    (StructuredOutputsParams(grammar="root ::= foo"), "structured_outputs.grammar", 'Rule "foo" is not defined'),
])
def test_a_constraint_that_does_not_compile_is_refused_naming_the_field(llm, constraint, param, reason):
    with pytest.raises(InvalidRequestError, match=re.escape(reason)) as refused:
        llm.engine.add_request("bad", "Hello", SamplingParams(structured_outputs=constraint))
    assert refused.value.param == param
    assert str(refused.value).startswith(f"{param} does not compile: ")
    assert not llm.engine.has_unfinished_requests()
    (out,) = generate(llm, [sampled(CASES["choice"][0], seed=0)])
    assert out.outputs[0].text in CHOICES
