"""An engine started before the CPU kernels exist serves at once with plain PyTorch, then uses them."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.kernels import cpu_extension
from autoglm.kernels.build_lock import build_lock
from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS, CPU_KERNELS, REQUIRED_CPU_FLAGS
from autoglm.kernels.kernel_spec import CACHE_ENV
from autoglm.platforms import cpu_has_flags
from tests.engine.reference import greedy_reference
from tests.tiny_models import make_tiny_checkpoint

pytestmark = pytest.mark.skipif(not cpu_has_flags(*REQUIRED_CPU_FLAGS), reason="the kernels need AVX2 and FMA")
HANG_S = 120


class CallCounter:
    """Stands in for the kernel module, counting the calls that reach it."""

    def __init__(self, module) -> None:
        self.module = module
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str):
        kernel = getattr(self.module, name)

        def counted(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return kernel(*args)

        return counted


def test_the_engine_serves_while_the_kernels_build_then_switches_to_them(cpu_kernels, cpu_without_bf16_units,
                                                                          monkeypatch, tmp_path):
    built_dir = Path(cpu_kernels.__file__).parent  # the session's build, copied in as if just built
    root = tmp_path / "kernels"
    monkeypatch.setenv(CACHE_ENV, str(root))
    monkeypatch.setattr(cpu_extension, "_build", None)  # as in a process that has not started them
    model_dir = make_tiny_checkpoint("qwen2", tmp_path / "model", dtype=torch.bfloat16)
    prompts = [[3, 14, 15, 92, 65], [35, 89, 79]]
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    reference = greedy_reference(model_dir, prompts, max_new_tokens=8)

    with build_lock(CPU_KERNELS.lock_path(root), timeout_s=0):  # the build child waits for this
        llm = LLM(model=str(model_dir), dtype="bfloat16", cpu_upcast_half=True, cpu_kernel_max_rows=8)
        assert cpu_extension.cpu_kernels() is None and llm.engine.decode_weight_dtype == torch.float32
        before = [llm.generate([prompt], params, use_tqdm=False)[0].outputs[0].token_ids for prompt in prompts]
        assert before == reference.token_ids
        shutil.copytree(built_dir, CPU_KERNELS.build_dir(root))

    build = cpu_extension._build
    assert build is not None and build.wait(HANG_S) is not None
    assert build.child_pid is not None  # it was built in the background, not found at start
    counter = CallCounter(build.module)
    build.module = counter
    assert llm.engine.decode_weight_dtype == torch.bfloat16
    after = [llm.generate([prompt], params, use_tqdm=False)[0].outputs[0].token_ids for prompt in prompts]
    assert after == reference.token_ids
    assert sum(calls for name, calls in counter.calls.items() if name.startswith("linear_bf16_weight")) > 0
    assert counter.calls.get("paged_decode_attention", 0) > 0 or not cpu_has_flags(*ATTENTION_CPU_FLAGS)
