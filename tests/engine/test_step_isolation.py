"""A step that raises ends only the request that caused it; the others go on and get what they would have."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.errors import RequestsFailedError
from autoglm.runner import model_runner
from autoglm.runner.sampler import SamplingBatch
from tests.engine.test_engine import assert_idle
from tests.engine.test_step_safety import llm  # noqa: F401 (a fixture: a tiny float32 engine)

# A request with this seed makes every step that samples for it raise (the hook below).
FAULTY_SEED = 424242
PROMPTS = {"a": [5, 6, 7, 8], "b": [9, 10, 11, 12, 13, 14, 15], "c": [20, 21]}
PARAMS = {"a": SamplingParams(temperature=0.0, max_tokens=10), "b": SamplingParams(temperature=0.0, max_tokens=12),
          "c": SamplingParams(temperature=1.0, seed=7, max_tokens=10)}


class FaultySamplingBatch(SamplingBatch):
    @classmethod
    def build(cls, rows, *args, **kwargs):
        if any(row.seed == FAULTY_SEED for row in rows):
            raise RuntimeError("injected sampler fault")
        return super().build(rows, *args, **kwargs)


@pytest.fixture(scope="module")
def expected(llm):
    """What each request gets with no faulty request beside it."""
    return {rid: out.outputs[0].token_ids
            for rid, out in zip(PROMPTS, llm.generate(list(PROMPTS.values()), list(PARAMS.values()), use_tqdm=False))}


def run(llm: LLM, faulty: dict[str, SamplingParams], steps_before_faulty: int = 0):
    """Step the normal requests (the faulty ones join after `steps_before_faulty` steps) to the end;
    the finished outputs and the ids each RequestsFailedError named."""
    engine = llm.engine
    for rid, prompt in PROMPTS.items():
        engine.add_request(rid, prompt, PARAMS[rid])
    tokens: dict[str, list[int]] = {}
    failed: list[str] = []
    for step in range(500):
        if step == steps_before_faulty:
            for rid, params in faulty.items():
                engine.add_request(rid, [30, 31, 32], params)
        if step > steps_before_faulty and not engine.has_unfinished_requests():
            return tokens, failed
        try:
            outputs = engine.step()
        except RequestsFailedError as error:
            failed.extend(error.request_ids)
            continue
        for output in outputs:
            tokens.setdefault(output.request_id, []).extend(output.outputs[0].token_ids)
    pytest.fail("the requests did not finish")


@pytest.mark.parametrize("steps_before_faulty", [0, 3])  # in the first prefill, or beside running decodes
def test_only_the_request_that_makes_steps_fail_ends(llm, expected, monkeypatch, steps_before_faulty):
    monkeypatch.setattr(model_runner, "SamplingBatch", FaultySamplingBatch)
    failed_steps = llm.engine.num_failed_steps
    faulty = {"faulty": SamplingParams(temperature=0.0, seed=FAULTY_SEED, max_tokens=10)}
    tokens, failed = run(llm, faulty, steps_before_faulty)
    assert failed == ["faulty"]
    assert tokens == expected  # the faulty request handed out nothing; the others all they would have
    assert llm.engine.num_failed_steps >= failed_steps + 2  # the shared step, then the faulty one alone
    assert_idle(llm)


def test_a_faulty_request_alone_in_its_step_ends_at_once(llm, monkeypatch):
    monkeypatch.setattr(model_runner, "SamplingBatch", FaultySamplingBatch)
    engine = llm.engine
    failed_steps = engine.num_failed_steps
    engine.add_request("faulty", [30, 31], SamplingParams(seed=FAULTY_SEED))
    with pytest.raises(RequestsFailedError, match="injected sampler fault") as raised:
        engine.step()
    assert raised.value.request_ids == ["faulty"] and engine.num_failed_steps == failed_steps + 1
    assert_idle(llm)


def test_two_faulty_requests_both_end_and_the_others_finish(llm, expected, monkeypatch):
    monkeypatch.setattr(model_runner, "SamplingBatch", FaultySamplingBatch)
    faulty = {name: SamplingParams(seed=FAULTY_SEED, max_tokens=5) for name in ("faulty-1", "faulty-2")}
    tokens, failed = run(llm, faulty, steps_before_faulty=2)
    assert sorted(failed) == ["faulty-1", "faulty-2"]
    assert tokens == expected
    assert_idle(llm)


def test_a_step_failing_after_its_tokens_were_taken_in_loses_none_of_them(llm, expected, monkeypatch):
    """Tokens appended and requests finished before the failure stay so: the finished ones' outputs
    come with the next step, the others compute their KV again and go on to the same tokens."""
    engine = llm.engine
    append_token = engine._append_token
    injected = []

    def fail_once_after_a_request_finished(state, completion, *args):
        append_token(state, completion, *args)
        if completion.finish_reason is not None and not injected:
            injected.append(state.request_id)
            raise RuntimeError("injected fault after a request finished")

    monkeypatch.setattr(engine, "_append_token", fail_once_after_a_request_finished)
    tokens, failed = run(llm, {})
    assert injected and failed == []
    assert tokens == expected
    assert_idle(llm)
