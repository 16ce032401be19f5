"""Async scheduling on a CUDA GPU: launching a decode step never waits for the device. Skipped without CUDA."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.step_plan import StepPlan
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("enforce_eager", [False, True], ids=["graphs", "eager"])
def test_launching_a_decode_step_does_not_wait_for_the_device(tmp_path, enforce_eager):
    """Any host synchronisation inside a launch (a blocking copy, ``.item()``) raises under sync debug mode."""
    llm = LLM(model=str(make_tiny_checkpoint("qwen2", tmp_path)), dtype="float32", device="cuda",
              async_scheduling=True, enforce_eager=enforce_eager)
    launch = llm.engine.runner.launch
    strict: list[StepPlan] = []

    def strict_launch(plan: StepPlan):
        if not plan.deferred_positions:  # a prefill: its metadata may read lengths on the host
            return launch(plan)
        strict.append(plan)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return launch(plan)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    llm.engine.runner.launch = strict_launch
    params = [SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True, logprobs=2),
              SamplingParams(temperature=0.9, top_k=20, seed=3, max_tokens=16, ignore_eos=True)]
    synchronous = LLM(model=llm.config.model, dtype="float32", device="cuda", async_scheduling=False,
                      enforce_eager=enforce_eager)
    prompts = [[5, 6, 7], list(range(10, 40))]
    got = [c.token_ids for out in llm.generate(prompts, params, use_tqdm=False) for c in out.outputs]
    expected = [c.token_ids for out in synchronous.generate(prompts, params, use_tqdm=False) for c in out.outputs]
    assert len(strict) >= 10
    assert got == expected
