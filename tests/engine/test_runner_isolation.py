"""Runners keep their state to themselves, and a plan may leave tokens for the device to fill."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.sampling_params import RequestOutputKind
from autoglm.engine.plan_builder import build_step_plan
from autoglm.engine.sequence import Sequence
from autoglm.runner.kv_cache import attention_layers
from tests.tiny_models import make_tiny_checkpoint

PROMPTS = [[5, 9, 13, 7, 21, 3], [40, 41, 42], [17] * 20]
PARAMS = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True, logprobs=1)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    return [make_tiny_checkpoint(arch, tmp_path_factory.mktemp(arch)) for arch in ("llama", "qwen3")]


def solo(model_dir):
    outputs = LLM(model=str(model_dir), dtype="float32").generate(PROMPTS, PARAMS, use_tqdm=False)
    return [output.outputs[0].token_ids for output in outputs]


def test_two_engines_stepping_alternately_each_give_their_solo_outputs(model_dirs):
    expected = [solo(model_dir) for model_dir in model_dirs]
    engines = [LLM(model=str(model_dir), dtype="float32").engine for model_dir in model_dirs]
    for engine in engines:
        contexts = {id(layer.forward_context) for layer in attention_layers(engine.runner.model)}
        assert contexts == {id(engine.runner.forward_context)}
    for engine in engines:
        for i, prompt in enumerate(PROMPTS):
            engine.add_request(str(i), prompt, dataclasses.replace(PARAMS, output_kind=RequestOutputKind.FINAL_ONLY))
    finished: list[dict[str, list[int]]] = [{}, {}]
    while any(engine.has_unfinished_requests() for engine in engines):
        for engine, done in zip(engines, finished):
            for output in engine.step():
                if output.finished:
                    done[output.request_id] = output.outputs[0].token_ids
    for got, want in zip(finished, expected):
        assert [got[str(i)] for i in range(len(PROMPTS))] == want


def test_a_deferred_token_is_the_previous_steps_sample(model_dirs):
    runner = LLM(model=str(model_dirs[0]), dtype="float32").engine.runner
    seq = Sequence(request_id="r", index=0, token_ids=list(PROMPTS[0]), num_prompt_tokens=len(PROMPTS[0]),
                   params=PARAMS, max_tokens=12, arrival_time=0.0)
    seq.block_table = [0]
    (first,) = runner.execute(build_step_plan([seq], [seq.num_tokens], 16, set()).plan).token_ids
    seq.num_computed_tokens = seq.num_tokens
    seq.token_ids.append(first)
    plan = build_step_plan([seq], [1], 16, set()).plan
    deferred = dataclasses.replace(plan, input_ids=torch.zeros_like(plan.input_ids), deferred_positions=[0],
                                   deferred_sources=[0])
    from_device = runner.execute(deferred)
    from_plan = runner.execute(plan)  # rewrites the same KV slot with the same values
    assert from_device == from_plan
