"""An engine started before the CPU kernels exist serves at once with plain PyTorch, then switches to them at
a step where no request runs, so that no request's output depends on when the build ended; the offline
``LLM`` waits for them before its first step, saying so."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.kernels import cpu_extension
from autoglm.kernels.build_lock import build_lock
from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS, CPU_KERNELS, REQUIRED_CPU_FLAGS
from autoglm.kernels.kernel_spec import CACHE_ENV
from autoglm.platforms import cpu_has_flags
from autoglm.sampling_params import RequestOutputKind
from tests.engine.reference import greedy_reference
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.skipif(not cpu_has_flags(*REQUIRED_CPU_FLAGS), reason="the kernels need AVX2 and FMA")
HANG_S = 120
PROMPTS = {"first": [3, 14, 15, 92, 65], "second": [35, 89, 79]}
# Every step hands out each running request's tokens so far: who ran in a step is who has an output.
GREEDY = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, output_kind=RequestOutputKind.CUMULATIVE)


class CallCounter:
    """Stands in for the kernel module, counting the calls that reach it."""

    def __init__(self, module) -> None:
        self.module = module
        self.calls: dict[str, int] = {}

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def __getattr__(self, name: str):
        kernel = getattr(self.module, name)

        def counted(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return kernel(*args)

        return counted


class HeldBuild:
    """Stands in for the background build: nothing is built until the test calls ``finish`` (or, with
    ``ends_when_waited``, until someone waits)."""

    def __init__(self, library, ends_when_waited: bool = False) -> None:
        self.library = library
        self.ends_when_waited = ends_when_waited
        self.module = None
        self.failed = False

    def finish(self) -> None:
        self.module = self.library

    def wait(self, timeout_s: float):
        if self.ends_when_waited:
            self.finish()
        return self.module


@pytest.fixture
def bf16_model(tmp_path):
    return make_tiny_checkpoint("qwen2", tmp_path / "model", dtype=torch.bfloat16)


@pytest.fixture
def held_build(cpu_kernels, cpu_without_bf16_units, monkeypatch) -> HeldBuild:
    """A process whose kernels are still building: ``held_build.finish()`` ends the build."""
    build = HeldBuild(CallCounter(cpu_kernels))
    monkeypatch.setattr(cpu_extension, "_build", build)
    monkeypatch.setattr(cpu_extension, "_outside_steps", None)
    monkeypatch.setattr(cpu_extension, "estimated_build_seconds", lambda spec, root: 42.0)
    return build


def engine_for(model_dir) -> LLMEngine:
    return LLMEngine(AutoGLMConfig(model=str(model_dir), dtype="bfloat16", cpu_upcast_half=True).engine_config())


def run_alone(engine: LLMEngine, request_id: str) -> list[int]:
    engine.add_request(request_id, PROMPTS[request_id], GREEDY)
    while True:
        for output in engine.step():
            if output.finished:
                return output.outputs[0].token_ids


def test_a_request_begun_on_pytorch_ends_on_it_and_one_that_waited_runs_on_the_kernels(held_build, bf16_model):
    counter = held_build.library
    on_pytorch = {request_id: run_alone(engine_for(bf16_model), request_id) for request_id in PROMPTS}
    assert counter.total == 0
    engine = engine_for(bf16_model)
    engine.add_request("first", PROMPTS["first"], GREEDY)
    engine.step()
    held_build.finish()  # mid-request
    engine.add_request("second", PROMPTS["second"], GREEDY)
    steps: list[tuple[set[str], bool]] = []  # who ran in each step, and whether it reached the kernels
    tokens: dict[str, list[int]] = {}
    while engine.has_unfinished_requests() and len(steps) < 4 * GREEDY.max_tokens:
        before = counter.total
        outputs = engine.step()
        steps.append(({output.request_id for output in outputs}, counter.total > before))
        tokens.update({output.request_id: output.outputs[0].token_ids for output in outputs if output.finished})
    assert set(tokens) == set(PROMPTS), "the request that waited during the switch must be admitted after it"
    assert all(not kernels for ran, kernels in steps if "first" in ran)
    assert all(kernels and ran == {"second"} for ran, kernels in steps if "second" in ran)
    assert tokens["first"] == on_pytorch["first"] and len(tokens["first"]) == GREEDY.max_tokens
    assert tokens["second"] == run_alone(engine_for(bf16_model), "second")  # the kernels' tokens, now in use
    assert engine.kernel_switch.in_use


def test_llm_waits_for_the_build_saying_so_and_then_runs_on_the_kernels(held_build, bf16_model, caplog):
    held_build.ends_when_waited = True
    with caplog.at_level(logging.INFO, logger="autoglm"):
        llm = LLM(model=str(bf16_model), dtype="bfloat16", cpu_upcast_half=True)
    messages = [record.getMessage() for record in caplog.records]
    waiting = [message for message in messages if message.startswith("waiting for the CPU kernels to build")]
    assert len(waiting) == 1 and "about 42 s" in waiting[0]
    assert any(message.startswith("the CPU kernels are built (") for message in messages)
    assert llm.engine.kernel_switch.in_use
    llm.generate([PROMPTS["first"]], GREEDY, use_tqdm=False)
    assert held_build.library.total > 0


def test_health_detail_follows_the_build(held_build, monkeypatch):
    assert cpu_extension.cpu_kernel_status().startswith("building (about 42 s, started ")
    held_build.finish()
    assert cpu_extension.cpu_kernel_status() == "ready"
    held_build.module, held_build.failed = None, True
    assert cpu_extension.cpu_kernel_status().startswith("unavailable: ")


def test_the_engine_serves_while_the_kernels_build_then_switches_to_them(cpu_kernels, cpu_without_bf16_units,
                                                                          monkeypatch, tmp_path):
    built_dir = Path(cpu_kernels.__file__).parent  # the session's build, copied in as if just built
    root = tmp_path / "kernels"
    monkeypatch.setenv(CACHE_ENV, str(root))
    monkeypatch.setattr(cpu_extension, "_build", None)  # as in a process that has not started them
    monkeypatch.setattr(cpu_extension, "_outside_steps", None)
    model_dir = make_tiny_checkpoint("qwen2", tmp_path / "model", dtype=torch.bfloat16)
    reference = greedy_reference(model_dir, list(PROMPTS.values()), max_new_tokens=8)

    with build_lock(CPU_KERNELS.lock_path(root), timeout_s=0):  # the build child waits for this
        engine = engine_for(model_dir)
        assert not engine.kernel_switch.in_use and engine.decode_weight_dtype == torch.float32
        before = [run_alone(engine, request_id) for request_id in PROMPTS]
        assert before == reference.token_ids
        shutil.copytree(built_dir, CPU_KERNELS.build_dir(root))

    build = cpu_extension._build
    assert build is not None and build.wait(HANG_S) is not None
    assert build.child_pid is not None  # it was built in the background, not found at start
    counter = CallCounter(build.module)
    build.module = counter
    after = [run_alone(engine, request_id) for request_id in PROMPTS]
    assert engine.kernel_switch.in_use and engine.decode_weight_dtype == torch.bfloat16
    assert after == reference.token_ids
    assert sum(calls for name, calls in counter.calls.items() if name.startswith("linear_bf16_weight")) > 0
    assert counter.calls.get("paged_decode_attention", 0) > 0 or not cpu_has_flags(*ATTENTION_CPU_FLAGS)
