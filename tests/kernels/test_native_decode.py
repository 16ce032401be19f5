"""The native decode step (the whole stack of a decode step as one compiled call) computes what the layer-by-layer
forward computes, bit for bit: the same greedy tokens and the very same log-prob bits, for every family's variant
of the decoder (biases, per-head q/k norms, sandwich norms, interleaved partial rotary), in bfloat16 on the CPU's
bfloat16 units and in float32 through the bfloat16-weight kernel; and it stands aside where it cannot stand in."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS
from autoglm.models.native_decode import NativeDecodeStep
from autoglm.platforms import cpu_has_flags
from tests.tiny_models import TINY_ARCHITECTURES, make_tiny_checkpoint

pytestmark = pytest.mark.skipif(not cpu_has_flags(*ATTENTION_CPU_FLAGS),
                                reason="the native decode step needs AVX-512 (avx512f, avx512bw)")

PROMPTS = [[5, 17, 42], [7] * 19, list(range(3, 40)), [200, 201, 202, 203, 9]]
GREEDY = SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True, logprobs=3)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return {arch: make_tiny_checkpoint(arch, tmp_path_factory.mktemp(arch), dtype=torch.bfloat16)
            for arch in TINY_ARCHITECTURES}


@pytest.fixture
def native_calls(monkeypatch):
    """How many steps the native decode step computed (not stood aside for)."""
    count = {"native": 0}
    original = NativeDecodeStep.__call__

    def counting(self, input_ids, positions):
        hidden = original(self, input_ids, positions)
        count["native"] += hidden is not None
        return hidden

    monkeypatch.setattr(NativeDecodeStep, "__call__", counting)
    return count


def generate(model, rows: int, **settings) -> list[tuple[list[int], list[dict]]]:
    llm = LLM(model=str(model), dtype="bfloat16", cpu_decode_step_max_rows=rows, **settings)
    together = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
    alone = llm.generate([PROMPTS[1]], GREEDY, use_tqdm=False)
    return [(out.outputs[0].token_ids, [{t: p.logprob for t, p in step.items()} for step in out.outputs[0].logprobs])
            for out in together + alone]


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_the_native_step_computes_the_bits_of_the_layer_by_layer_forward(checkpoints, native_calls, cpu_kernels,
                                                                         arch):
    native = generate(checkpoints[arch], rows=64)
    assert native_calls["native"] > 0, "no decode step ran natively"
    calls = native_calls["native"]
    assert generate(checkpoints[arch], rows=0) == native
    assert native_calls["native"] == calls, "cpu_decode_step_max_rows 0 still ran a step natively"


@pytest.mark.parametrize("arch", ["qwen2", "glm4"])
def test_in_float32_through_the_bfloat16_weight_kernel_too(checkpoints, native_calls, cpu_kernels,
                                                           cpu_without_bf16_units, arch):
    native = generate(checkpoints[arch], rows=64)
    assert native_calls["native"] > 0
    assert generate(checkpoints[arch], rows=0) == native


def test_steps_of_more_sequences_than_the_limit_run_layer_by_layer(checkpoints, native_calls, cpu_kernels):
    limited = generate(checkpoints["qwen2"], rows=2)  # four prompts decode together: 4 rows > 2
    assert native_calls["native"] > 0  # the prompt alone, and the batch's last rows, ran natively
    assert limited == generate(checkpoints["qwen2"], rows=0)


def test_an_int8_kv_cache_runs_layer_by_layer(checkpoints, native_calls, cpu_kernels):
    generate(checkpoints["llama"], rows=64, kv_cache_dtype="int8")
    assert native_calls["native"] == 0


@pytest.mark.skipif(not cpu_has_flags("avx512_vnni"), reason="the int8-activation kernel needs avx512_vnni")
@pytest.mark.parametrize("quantization", ["w8a8", "w4a8"])
def test_with_int8_activations_too(checkpoints, native_calls, cpu_kernels, quantization):
    settings = {"quantization": quantization, "quantize_lm_head": True}
    native = generate(checkpoints["qwen2"], rows=64, **settings)
    assert native_calls["native"] > 0
    assert generate(checkpoints["qwen2"], rows=0, **settings) == native
