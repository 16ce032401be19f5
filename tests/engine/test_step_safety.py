"""No accepted request can make an engine step fail, nor change what the requests beside it get."""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoglm import LLM, SamplingParams
from autoglm.sampling_params import MAX_INT64, MAX_LOGIT_BIAS, MAX_LOGPROBS, MAX_SEED, MIN_SEED
from autoglm.structured_outputs import StructuredOutputsParams
from tests.engine.test_engine import assert_idle, drain
from tests.optional_packages import needs_xgrammar
from tests.tiny_models import make_tiny_checkpoint

PROMPTS = [[5, 6, 7, 8], [9, 10, 11, 12, 13, 14]]
NORMAL = SamplingParams(temperature=0.0, max_tokens=8)


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    model_dir = make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))
    return LLM(model=str(model_dir), dtype="float32", max_context_len=128, block_size=4)


@pytest.fixture(scope="module")
def alone(llm):
    """Each normal prompt's greedy tokens when it runs by itself."""
    return [out.outputs[0].token_ids for out in llm.generate(PROMPTS, NORMAL, use_tqdm=False)]


def edge_floats(low: float, high: float, edges: list[float], exclude_low: bool = False) -> st.SearchStrategy[float]:
    """Floats of [low, high] (or (low, high]), the values where float32 or a threshold changes its mind first."""
    return st.one_of(st.sampled_from(edges), st.floats(low, high, exclude_min=exclude_low, allow_nan=False))


TINY = [5e-324, 1e-320, 1e-46, 7e-46, 1e-45, 1e-40, 1.1754943508222875e-38]


def sampling_params(vocab_size: int) -> st.SearchStrategy[SamplingParams]:
    """Any SamplingParams validation accepts, leaning on the boundaries of each range."""
    token_ids = st.integers(0, vocab_size - 1)
    return st.builds(
        SamplingParams,
        n=st.integers(1, 3),
        temperature=edge_floats(0.0, 2.0, [0.0, *TINY, 1e-5, math.nextafter(1e-5, 0), 2.0]),
        top_p=edge_floats(0.0, 1.0, [*TINY, 0.5, math.nextafter(1.0, 0), 1.0], exclude_low=True),
        top_k=st.one_of(st.sampled_from([-1, 0, 1, 2, vocab_size - 1, vocab_size, vocab_size + 1, MAX_INT64]),
                        st.integers(-1, 2 * vocab_size)),
        min_p=edge_floats(0.0, 1.0, [0.0, *TINY, 1.0]),
        presence_penalty=edge_floats(-2.0, 2.0, [-2.0, 0.0, 2.0]),
        frequency_penalty=edge_floats(-2.0, 2.0, [-2.0, 0.0, 2.0]),
        repetition_penalty=edge_floats(0.0, 2.0, [*TINY, 1.0, 2.0], exclude_low=True),
        seed=st.one_of(st.none(), st.sampled_from([MIN_SEED, -1, 0, MAX_SEED]), st.integers(MIN_SEED, MAX_SEED)),
        stop_token_ids=st.one_of(st.none(), st.lists(st.one_of(token_ids, st.just(MAX_INT64)), max_size=4),
                                 st.just(list(range(vocab_size)))),
        logit_bias=st.one_of(st.none(), st.dictionaries(token_ids, edge_floats(
            -MAX_LOGIT_BIAS, MAX_LOGIT_BIAS, [-MAX_LOGIT_BIAS, 0.0, MAX_LOGIT_BIAS]), max_size=4)),
        ignore_eos=st.booleans(),
        max_tokens=st.integers(1, 8),
        min_tokens=st.integers(0, 1),
        logprobs=st.one_of(st.none(), st.sampled_from([0, 1, MAX_LOGPROBS])),
        prompt_logprobs=st.one_of(st.none(), st.sampled_from([0, MAX_LOGPROBS])),
    )


def run_beside_normal_requests(llm: LLM, hostile: list[SamplingParams], alone: list[list[int]]) -> None:
    """Step the hostile requests beside the normal ones to the end: no step may raise, the normal
    requests get what they get alone, and the KV pool is whole afterwards."""
    engine = llm.engine
    failed_steps = engine.num_failed_steps
    try:
        for index, prompt in enumerate(PROMPTS):
            engine.add_request(f"normal-{index}", prompt, NORMAL)
        for index, params in enumerate(hostile):
            engine.add_request(f"hostile-{index}", PROMPTS[index % len(PROMPTS)], params)
        outputs = drain(engine)
    finally:  # a failing example leaves the engine clean for hypothesis' next one
        for request_id in list(engine.requests):
            engine.abort_request(request_id)
    assert engine.num_failed_steps == failed_steps
    assert [outputs[f"normal-{index}"].outputs[0].token_ids for index in range(len(PROMPTS))] == alone
    vocab_size = engine.model_config.vocab_size
    for index in range(len(hostile)):
        assert all(0 <= t < vocab_size for c in outputs[f"hostile-{index}"].outputs for t in c.token_ids)
    assert_idle(llm)


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_no_accepted_sampling_params_make_a_step_fail_or_change_other_requests(llm, alone, data):
    vocab_size = llm.engine.model_config.vocab_size
    hostile = data.draw(st.lists(sampling_params(vocab_size), min_size=1, max_size=3))
    run_beside_normal_requests(llm, hostile, alone)


CONSTRAINTS = [
    StructuredOutputsParams(regex="[a-c]{1,3}"),
    StructuredOutputsParams(choice=["yes", "no"]),
    StructuredOutputsParams(json={"type": "object", "properties": {"a": {"type": "integer"}}}),
]


@needs_xgrammar
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_constrained_requests_with_any_accepted_sampling_params_never_fail_a_step(llm, alone, data):
    vocab_size = llm.engine.model_config.vocab_size
    params = data.draw(sampling_params(vocab_size))
    constraint = data.draw(st.sampled_from(CONSTRAINTS))
    fields = {name: getattr(params, name) for name in params.__dataclass_fields__}
    constrained = SamplingParams(**{**fields, "structured_outputs": constraint})
    run_beside_normal_requests(llm, [constrained], alone)
