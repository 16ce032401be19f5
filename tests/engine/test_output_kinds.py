"""Output kinds through LLMEngine.step(): CUMULATIVE hands out, at every step, what DELTA's outputs add up to."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.outputs import RequestOutput
from autoglm.sampling_params import RequestOutputKind, SamplingParams
from tests.tiny_models import make_tiny_checkpoint

# Sampled, two completions (the second starts a step after the first), with token and prompt log-probs.
PARAMS = SamplingParams(n=2, temperature=1.0, seed=11, max_tokens=7, ignore_eos=True, logprobs=2, prompt_logprobs=1)
PROMPT = [3, 17, 29, 41, 5, 8]
MAX_STEPS = 100


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    model_dir = make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))
    # No prefix cache: the second run's prompt is computed (and scored) exactly as the first's.
    engine = LLMEngine(AutoGLMConfig(model=str(model_dir), dtype="float32", max_context_len=64, block_size=4,
                                     enable_prefix_caching=False).engine_config())
    yield engine
    engine.close()


def each_step(engine: LLMEngine, request_id: str, kind: RequestOutputKind,
              snapshots: list[RequestOutput] | None = None) -> list[RequestOutput]:
    """The request's output at each step that handed one out, until it finished; a copy of each as it
    was handed out goes into ``snapshots``."""
    engine.add_request(request_id, PROMPT, dataclasses.replace(PARAMS, output_kind=kind))
    outputs = []
    for _ in range(MAX_STEPS):
        for output in engine.step():
            if output.request_id == request_id:
                outputs.append(output)
                if snapshots is not None:
                    snapshots.append(copy.deepcopy(output))
        if outputs and outputs[-1].finished:
            return outputs
    pytest.fail(f"{request_id} unfinished after {MAX_STEPS} steps")


def running_sums(deltas: list[RequestOutput]) -> list[RequestOutput]:
    """What the deltas add up to after each of them, each sum a copy of its own."""
    whole = copy.deepcopy(deltas[0])
    sums = [copy.deepcopy(whole)]
    for delta in deltas[1:]:
        whole.add(copy.deepcopy(delta))
        sums.append(copy.deepcopy(whole))
    return sums


def test_cumulative_outputs_are_the_running_sums_of_the_deltas(engine):
    deltas = each_step(engine, "delta", RequestOutputKind.DELTA)
    cumulative = each_step(engine, "cumulative", RequestOutputKind.CUMULATIVE)
    assert len(cumulative) == len(deltas) > 2
    for step, (got, expected) in enumerate(zip(cumulative, running_sums(deltas))):
        assert [c.index for c in got.outputs] == [c.index for c in expected.outputs], f"step {step}"
        for completion, summed in zip(got.outputs, expected.outputs):
            assert completion.text == summed.text and completion.token_ids == summed.token_ids, f"step {step}"
            assert completion.logprobs == summed.logprobs, f"step {step}"
            assert completion.cumulative_logprob == pytest.approx(summed.cumulative_logprob), f"step {step}"
            assert (completion.finish_reason, completion.stop_reason) == (summed.finish_reason, summed.stop_reason)
        assert got.prompt_logprobs == expected.prompt_logprobs and got.finished == expected.finished
    assert len(cumulative[0].outputs) == 1 and len(cumulative[-1].outputs) == 2  # n = 2: the second came later
    assert all(len(c.token_ids) == len(c.logprobs) == PARAMS.max_tokens for c in cumulative[-1].outputs)


def test_a_cumulative_output_handed_out_is_not_changed_by_later_steps(engine):
    as_handed_out: list[RequestOutput] = []
    outputs = each_step(engine, "kept", RequestOutputKind.CUMULATIVE, as_handed_out)
    for output, snapshot in zip(outputs, as_handed_out, strict=True):
        assert [(c.text, c.token_ids, c.logprobs) for c in output.outputs] == [
            (c.text, c.token_ids, c.logprobs) for c in snapshot.outputs]
    sizes = [sum(len(c.token_ids) for c in output.outputs) for output in outputs]
    assert sizes == sorted(set(sizes)), "each output holds everything so far, more at every step"


def test_final_only_is_the_last_cumulative_output(engine):
    (final,) = each_step(engine, "final", RequestOutputKind.FINAL_ONLY)
    last = each_step(engine, "last", RequestOutputKind.CUMULATIVE)[-1]
    assert [(c.text, c.token_ids, c.logprobs) for c in final.outputs] == [
        (c.text, c.token_ids, c.logprobs) for c in last.outputs]
    assert final.prompt_logprobs == last.prompt_logprobs
