"""Async scheduling, forced on for the CPU: the tokens of the step-by-step loop, and a whole KV pool after."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.engine.async_scheduling import async_scheduling_enabled, needs_synchronous_steps
from autoglm.outputs import RequestOutput, add_delta
from autoglm.step_plan import StepPlan
from autoglm.structured_outputs import StructuredOutputsParams
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.optional_packages import needs_xgrammar
from tests.tiny_models import make_tiny_checkpoint

STOP_TOKENS = list(range(100, 120))  # a random model draws one of these now and then: stops mid-batch
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))


def make_llm(model_dir, async_scheduling: bool, **settings) -> tuple[LLM, list[StepPlan]]:
    """An engine, and the plans its runner launches from now on."""
    llm = LLM(model=str(model_dir), dtype="float32", max_context_len=256, block_size=4,
              async_scheduling=async_scheduling, **settings)
    return llm, recorded_plans(llm)


def recorded_plans(llm: LLM) -> list[StepPlan]:
    """The plans the engine's runner launches from now on."""
    plans: list[StepPlan] = []
    launch = llm.engine.runner.launch

    def recording_launch(plan: StepPlan):
        plans.append(plan)
        return launch(plan)

    llm.engine.runner.launch = recording_launch
    return plans


def prompts() -> list[list[int]]:
    """Every second prompt starts with the same 12 tokens (prefix cache hits once the first has run)."""
    shared = list(range(20, 32))
    return [(shared if i % 2 else []) + [3 + (7 * i + j) % 50 for j in range(3 + 5 * i)] for i in range(8)]


def mixed_params() -> list[SamplingParams]:
    """Greedy with log-probs, seeded draws with n = 2, stop tokens, lengths from 2 to 23 tokens."""
    params = []
    for i in range(8):
        stops = STOP_TOKENS if i % 3 == 0 else []
        if i % 2:
            params.append(SamplingParams(temperature=0.9, top_p=0.9, seed=100 + i, n=2, max_tokens=2 + 3 * i,
                                         stop_token_ids=stops))
        else:
            params.append(SamplingParams(temperature=0.0, logprobs=2, max_tokens=2 + 3 * i, stop_token_ids=stops))
    return params


LOGPROB_TOLERANCE = 1e-4  # rows batched differently sum in another order


def completions(outputs: list[RequestOutput]) -> list[tuple]:
    """Each completion's tokens, text, finish and log-probs (compared to LOGPROB_TOLERANCE)."""
    return [(c.token_ids, c.text, c.finish_reason, c.stop_reason,
             [{t: pytest.approx(p.logprob, abs=LOGPROB_TOLERANCE) for t, p in position.items()}
              for position in c.logprobs or []])
            for output in outputs for c in output.outputs]


def assert_idle(llm: LLM) -> None:
    engine, manager = llm.engine, llm.engine.block_manager
    assert not engine.has_unfinished_requests() and engine._in_flight is None
    assert manager.num_referenced_blocks() == 0 and manager.num_free_blocks == manager.num_blocks
    manager.check_invariants()


def overlapped(plans: list[StepPlan]) -> int:
    """Plans launched before the step they read their inputs from had come back."""
    return sum(1 for plan in plans if plan.deferred_positions)


@pytest.mark.parametrize("setting, device, expected", [("auto", "cuda", True), ("auto", "cpu", False),
                                                       (True, "cpu", True), (False, "cuda", False)])
def test_auto_overlaps_on_cuda_only(setting, device, expected):
    assert async_scheduling_enabled(setting, torch.device(device)) is expected


@pytest.mark.parametrize("params, expected", [
    (SamplingParams(temperature=0.8, seed=1, logprobs=3, logit_bias={5: 1.0}, min_tokens=2), False),
    (SamplingParams(structured_outputs=StructuredOutputsParams(regex="[ab]+")), True),
    (SamplingParams(prompt_logprobs=0), True),
    (SamplingParams(repetition_penalty=1.2), True),
    (SamplingParams(frequency_penalty=0.5), True),
    (SamplingParams(presence_penalty=-0.5), True),
])
def test_requests_that_read_their_last_token_on_the_host_run_step_by_step(params, expected):
    assert needs_synchronous_steps(params) is expected


@pytest.mark.parametrize("max_num_seqs", [1, 3, 16])
def test_outputs_match_the_step_by_step_loop(model_dir, max_num_seqs):
    results = []
    for async_scheduling in (False, True):
        llm, plans = make_llm(model_dir, async_scheduling, max_num_seqs=max_num_seqs)
        results.append(completions(llm.generate(prompts(), mixed_params(), use_tqdm=False)))
        assert_idle(llm)
        assert (overlapped(plans) > 0) == async_scheduling
    assert results[1] == results[0]
    finish_reasons = [reason for _, _, reason, _, _ in results[0]]
    assert "stop" in finish_reasons and "length" in finish_reasons, "stops should end some sequences mid-batch"
    for (token_ids, *_), params in zip(results[1], [p for p in mixed_params() for _ in range(p.n)]):
        assert len(token_ids) <= params.max_tokens


def test_preemption_in_a_tiny_pool_keeps_the_tokens(model_dir):
    results = []
    for async_scheduling in (False, True):
        sizing, _ = make_llm(model_dir, False)
        llm, plans = make_llm(model_dir, async_scheduling, kv_cache_memory=kv_bytes_for_blocks(sizing, 20))
        results.append(completions(llm.generate(prompts(), mixed_params(), use_tqdm=False)))
        assert llm.engine.scheduler.num_preemptions > 0
        assert_idle(llm)
    assert results[1] == results[0]


def test_a_sequence_whose_pending_token_ends_it_is_not_computed_again(model_dir):
    """max_tokens is known before the token arrives: the step in flight is its last, as in the plain loop."""
    counts = []
    for async_scheduling in (False, True):
        llm, plans = make_llm(model_dir, async_scheduling)
        llm.generate([[5, 6, 7]], SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True), use_tqdm=False)
        counts.append(len(plans))
        assert overlapped(plans) == (5 if async_scheduling else 0)  # every decode reads the step before's token
        assert_idle(llm)
    assert counts == [6, 6]


def drain_with_aborts(llm: LLM, aborts: dict[int, list[str]]) -> dict[str, RequestOutput]:
    """Step until done, aborting the requests ``aborts`` names after the step of each index (bounded, never hangs)."""
    outputs: dict[str, RequestOutput] = {}
    for step in range(500):
        if not llm.engine.has_unfinished_requests():
            return outputs
        for delta in llm.engine.step():
            add_delta(outputs, delta.request_id, delta)
        for request_id in aborts.get(step, []):
            llm.engine.abort_request(request_id)
    pytest.fail("requests still unfinished after 500 steps")


def test_aborts_while_a_step_is_in_flight_leave_the_pool_whole(model_dir):
    aborts = {2: ["r1", "r4"], 5: ["r6"]}  # decoding, with their next step launched
    results = []
    for async_scheduling in (False, True):
        llm, _ = make_llm(model_dir, async_scheduling)
        for i, (prompt, params) in enumerate(zip(prompts(), mixed_params())):
            llm.engine.add_request(f"r{i}", prompt, params)
        outputs = drain_with_aborts(llm, aborts)
        assert_idle(llm)
        results.append({request_id: completions([output]) for request_id, output in outputs.items()
                        if request_id not in {"r1", "r4", "r6"}})
    assert results[1] == results[0] and len(results[0]) == 5


@pytest.mark.parametrize("special", [
    pytest.param(dict(params=SamplingParams(temperature=1.0, seed=3, max_tokens=30,
                                            structured_outputs=StructuredOutputsParams(regex="(ab|ba){3,20}"))),
                 marks=needs_xgrammar),
    dict(params=SamplingParams(temperature=0.8, seed=5, max_tokens=30, ignore_eos=True, repetition_penalty=1.3)),
    dict(params=SamplingParams(temperature=0.0, max_tokens=30, ignore_eos=True, prompt_logprobs=1)),
    dict(params=SamplingParams(temperature=0.0, max_tokens=30, ignore_eos=True), speculative_config=NGRAM),
], ids=["grammar", "penalty", "prompt-logprobs", "speculative"])
def test_steps_that_need_each_token_run_one_at_a_time_beside_plain_requests(model_dir, special):
    """No step with the special request's row overlaps the one before; the tokens are the plain loop's."""
    settings = {key: value for key, value in special.items() if key != "params"}
    params = mixed_params()[:4] + [special["params"]]
    results = []
    for async_scheduling in (False, True):
        llm, plans = make_llm(model_dir, async_scheduling, **settings)
        outputs = llm.generate(prompts()[:5], params, use_tqdm=False)
        results.append((completions(outputs), outputs[-1].prompt_logprobs))
        special_seq = max(row for plan in plans for row in plan.row_ids)  # the last request added
        assert not any(plan.deferred_positions for plan in plans if special_seq in plan.row_ids)
        assert_idle(llm)
    assert results[1] == results[0]


@needs_xgrammar
def test_plain_requests_overlap_again_once_a_constrained_one_is_done(model_dir):
    llm, plans = make_llm(model_dir, True)
    constrained = SamplingParams(temperature=0.0, max_tokens=4, structured_outputs=StructuredOutputsParams(regex="a+"))
    plain = SamplingParams(temperature=0.0, max_tokens=20, ignore_eos=True)
    llm.generate([[5, 6, 7], [8, 9, 10]], [constrained, plain], use_tqdm=False)
    assert not plans[0].deferred_positions and overlapped(plans) > 0
    assert_idle(llm)
