"""In bfloat16 on the CPU kernel path, speculation changes no greedy token either: a verified position is
computed bitwise as its decode step computes it (attention query by query through the decode kernel,
projections through a linear kernel that computes each row alone), so no near-tie between two logits
resolves differently. On a CPU without bfloat16 units the engine computes the checkpoint in float32,
through the same kernels, and the same holds."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS, wait_for_cpu_kernels
from autoglm.platforms import cpu_has_flags
from tests.engine.speculative.test_engine_parity import NGRAM, quoting_prompts
from tests.tiny_models import make_tiny_checkpoint

pytestmark = [pytest.mark.cpu_isa,
              pytest.mark.skipif(not cpu_has_flags(*ATTENTION_CPU_FLAGS),
                                 reason="the CPU kernel attention path needs AVX-512 (avx512f, avx512bw)")]

BUILD_WAIT_S = 600  # a bound to catch a hang; a first build takes under a minute on 2 cores
# Every step of these tests, plain or verifying, takes the linear kernel: a step of more rows would take
# PyTorch's matmul, which rounds in another order than the kernel.
MAX_KERNEL_ROWS = 64
GREEDY = SamplingParams(temperature=0.0, max_tokens=48, ignore_eos=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    assert wait_for_cpu_kernels(BUILD_WAIT_S) is not None, "the CPU kernels did not build; see the warning logged"
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("bf16") / "target", dtype=torch.bfloat16)


def generate(checkpoint, prompts, together: bool, **settings) -> tuple[LLM, list[list[int]]]:
    """Greedy outputs of ``prompts``, in one batch or one request at a time."""
    llm = LLM(model=str(checkpoint), dtype="bfloat16", cpu_kernel_max_rows=MAX_KERNEL_ROWS, **settings)
    assert llm.engine.runner.attention_backend.name == "cpu-kernel"
    batches = [prompts] if together else [[prompt] for prompt in prompts]
    outputs = [output for batch in batches for output in llm.generate(batch, GREEDY, use_tqdm=False)]
    return llm, [output.outputs[0].token_ids for output in outputs]


@pytest.fixture(params=["ngram", "draft_model"])
def spec(request, checkpoint) -> dict:
    """N-gram lookup, or the target as its own draft: every proposal is what the target decodes, so whole
    verification rows are kept."""
    if request.param == "ngram":
        return NGRAM
    return {"method": "draft_model", "num_speculative_tokens": 4, "model": str(checkpoint)}


@pytest.mark.parametrize("together", [False, True], ids=["alone", "batched"])
def test_greedy_output_with_speculation_is_unchanged_in_bfloat16(checkpoint, spec, together):
    prompts = quoting_prompts(4)
    _, plain = generate(checkpoint, prompts, together)
    llm, speculative = generate(checkpoint, prompts, together, speculative_config=spec)
    assert speculative == plain
    assert llm.engine.get_stats().spec_decode.num_draft_tokens > 0


def test_a_verification_takes_the_linear_kernel_whatever_the_measured_limit(checkpoint):
    """A batch of one verifies its decode token and its proposals through the kernel its decode steps take,
    even where PyTorch's matmul was measured faster at that many rows."""
    llm = LLM(model=str(checkpoint), dtype="bfloat16", speculative_config=NGRAM, cpu_kernel_max_rows="auto")
    assert llm.engine.linear_methods.layers.row_limit.min_rows == 1 + NGRAM["num_speculative_tokens"]
    plain = LLM(model=str(checkpoint), dtype="bfloat16", cpu_kernel_max_rows="auto")
    assert plain.engine.linear_methods.layers.row_limit.min_rows == 0
