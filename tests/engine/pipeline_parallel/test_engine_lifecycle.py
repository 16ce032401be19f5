"""A 2-stage engine on gloo, started once for the module: it samples, scores and constrains as one process does,
refuses what it cannot run before starting, and breaks for good, at once and loudly, when a stage dies."""
from __future__ import annotations

import os
import re
import signal
import threading

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine import torch_threads
from autoglm.engine.errors import EngineBrokenError
from autoglm.structured_outputs import StructuredOutputsParams
from tests.engine.tensor_parallel.test_engine_lifecycle import gone
from tests.tiny_models import make_tiny_checkpoint

SETTINGS = {"dtype": "float32", "max_context_len": 64, "block_size": 4, "kv_cache_memory": "1MiB"}
HANG_S = 60  # only to catch a hang
PROMPTS = [[5, 6, 7, 8, 9], [9, 10, 11], [12, 13, 14, 15], [16, 17]]
# Seeded draws, log-probs, prompt log-probs and penalties: every part of the plan reaches the last stage.
PARAMS = SamplingParams(temperature=0.8, top_k=20, seed=7, max_tokens=6, ignore_eos=True, logprobs=2,
                        prompt_logprobs=1, repetition_penalty=1.2)
REGEX = "(yes|no)-[0-9]{3}"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("qwen3", tmp_path_factory.mktemp("qwen3"), num_hidden_layers=3)  # stages of 2 and 1


def completions(llm: LLM) -> list[tuple[list[int], list[dict], list[dict | None]]]:
    return [(out.outputs[0].token_ids, out.outputs[0].logprobs, out.prompt_logprobs)
            for out in llm.generate(PROMPTS, PARAMS, use_tqdm=False)]


def constrained(llm: LLM) -> list[str]:
    params = SamplingParams(temperature=0.0, max_tokens=12, structured_outputs=StructuredOutputsParams(regex=REGEX))
    return [out.outputs[0].text for out in llm.generate(PROMPTS, params, use_tqdm=False)]


@pytest.fixture(scope="module")
def alone(model_dir):
    llm = LLM(model=str(model_dir), **SETTINGS)
    return completions(llm), constrained(llm)


@pytest.fixture(scope="module")
def two_stages(model_dir, alone):
    """Started after the single-process engine, whose threads the fixture's end gives back."""
    threads = torch_threads.torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch_threads, "_set_by_an_engine", False)
        with LLM(model=str(model_dir), pipeline_parallel_size=2, **SETTINGS) as llm:
            yield llm
    torch_threads.torch.set_num_threads(threads)


@pytest.mark.timeout(HANG_S * 2)
def test_two_stages_sample_score_and_constrain_as_one_process_does(two_stages, alone):
    expected, expected_text = alone
    for got, want in zip(completions(two_stages), expected, strict=True):
        assert got[0] == want[0]
        for position, wanted in zip(got[1] + got[2][1:], want[1] + want[2][1:], strict=True):
            assert {token: entry.logprob for token, entry in position.items()} == pytest.approx(
                {token: entry.logprob for token, entry in wanted.items()}, abs=1e-5)
    texts = constrained(two_stages)
    assert texts == expected_text
    assert all(re.fullmatch(REGEX, text) for text in texts)


@pytest.mark.parametrize(("settings", "message"), [
    ({"pipeline_parallel_size": 4}, "more than the model's 3 decoder layers; allowed: 1 to 3"),
    ({"pipeline_parallel_size": 0}, "pipeline_parallel_size"),
    ({"pipeline_parallel_size": 2, "speculative_config": {"method": "ngram", "num_speculative_tokens": 2}},
     r"speculative decoding \(method 'ngram'\) .* needs pipeline_parallel_size 1"),
])
def test_what_cannot_run_is_refused_before_any_stage_starts(model_dir, settings, message):
    with pytest.raises(ValueError, match=message):
        LLM(model=str(model_dir), **{**SETTINGS, **settings})


@pytest.mark.timeout(HANG_S * 2)
def test_a_dead_stage_breaks_the_engine_for_good_and_says_which(two_stages):
    """Last: it kills the module's engine."""
    (worker,) = two_stages.engine._workers.pids
    heard: list[EngineBrokenError] = []
    told = threading.Event()  # the listener may run on the watching thread, after the step has raised
    two_stages.engine.notify_when_broken(lambda error: (heard.append(error), told.set()))
    os.kill(worker, signal.SIGKILL)
    with pytest.raises(EngineBrokenError, match=r"pipeline stage 0 \(rank 0\) .* exited"):
        two_stages.generate(PROMPTS, PARAMS, use_tqdm=False)
    with pytest.raises(EngineBrokenError, match="must be restarted"):
        two_stages.generate(PROMPTS, PARAMS, use_tqdm=False)
    assert told.wait(HANG_S) and "pipeline stage 0" in str(heard[0])
    assert gone(worker)
