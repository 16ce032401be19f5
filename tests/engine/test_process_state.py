"""An engine keeps its randomness to itself, so engines can live and step side by side in one process."""
from __future__ import annotations

import logging

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.engine import torch_threads
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.torch_threads import claim_num_threads
from tests.tiny_models import make_tiny_checkpoint

UNSEEDED = SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=True)
GREEDY = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)  # in the batch, and draws nothing
REQUESTS = [([5, 6, 7, 8], UNSEEDED), ([9, 10, 11], GREEDY), ([3, 4], UNSEEDED)]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))


def build(model_dir, seed: int) -> LLMEngine:
    return LLM(model=str(model_dir), dtype="float32", max_context_len=64, block_size=4, seed=seed).engine


def add_requests(engine: LLMEngine) -> None:
    for index, (prompt, params) in enumerate(REQUESTS):
        engine.add_request(f"r{index}", prompt, params)


def tokens_by_request(engine: LLMEngine, outputs) -> dict[str, list[int]]:
    return {output.request_id: output.outputs[0].token_ids for output in outputs if output.finished}


def run_alone(engine: LLMEngine) -> dict[str, list[int]]:
    add_requests(engine)
    finished = {}
    while engine.has_unfinished_requests():
        finished.update(tokens_by_request(engine, engine.step()))
    return finished


def test_two_engines_stepping_in_turn_sample_what_each_samples_alone(model_dir):
    rng_state = torch.get_rng_state()
    first, second = build(model_dir, seed=1), build(model_dir, seed=2)
    first_alone, second_alone = run_alone(first), run_alone(second)
    assert first_alone != second_alone  # the seeds matter, so the comparison below can fail

    first, second = build(model_dir, seed=1), build(model_dir, seed=2)
    add_requests(first)
    add_requests(second)
    finished = {first: {}, second: {}}
    while first.has_unfinished_requests() or second.has_unfinished_requests():
        for engine in (first, second):
            finished[engine].update(tokens_by_request(engine, engine.step()))
    assert finished[first] == first_alone and finished[second] == second_alone
    assert torch.equal(torch.get_rng_state(), rng_state), "building or stepping an engine moved torch's global RNG"


def test_the_first_engine_sets_the_thread_count_and_a_later_one_asking_another_warns(monkeypatch, caplog):
    monkeypatch.setattr(torch_threads, "_set_by_an_engine", False)
    threads = torch.get_num_threads()  # asked for first, so that the test leaves the count as it was
    with caplog.at_level(logging.WARNING, logger="autoglm"):
        claim_num_threads(threads)
        claim_num_threads(None)
        claim_num_threads(threads)
        assert caplog.records == []
        claim_num_threads(threads + 1)
    assert torch.get_num_threads() == threads
    assert [record.getMessage() for record in caplog.records] == [
        f"num_threads={threads + 1} ignored: an earlier engine in this process set torch's thread count, which "
        f"is one per process, and it stays {threads}; give every engine the same num_threads"
    ]
