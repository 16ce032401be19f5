"""Greedy output does not depend on the batch on the default CPU path: every projection takes the linear kernel
and every query the decode attention kernel, each token computed as it is alone, so a request sent among 31
others, its prompt chunked beside decode steps, gets the tokens and the very log-prob bits it gets alone (its
prompt then found in the prefix cache). The default model is bfloat16: computed natively where the CPU has
bfloat16 units, else in float32 through the bfloat16-weight kernel; both are checked here, the second by hiding
the units."""
from __future__ import annotations

import random

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.llm_engine import LLMEngine
from autoglm.kernels.cpu_extension import ATTENTION_CPU_FLAGS, wait_for_cpu_kernels
from autoglm.model_paths import DEFAULT_MODEL_DIR
from autoglm.models.linear_method import CpuKernelLinearMethod
from autoglm import platforms
from autoglm.platforms import cpu_has_flags
from autoglm.sampling_params import RequestOutputKind

pytestmark = pytest.mark.skipif(not cpu_has_flags(*ATTENTION_CPU_FLAGS),
                                reason="the CPU kernel path needs AVX-512 (avx512f, avx512bw)")

BUILD_WAIT_S = 600  # a bound to catch a hang; a first build takes under a minute on 2 cores
NUM_REQUESTS = 32
ARRIVALS_PER_STEP = 4  # later requests' prompts are computed beside earlier ones' decode steps
STEP_TOKENS = 96  # a step's token budget: longer prompts are computed in chunks
GREEDY = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True, logprobs=0,
                        output_kind=RequestOutputKind.FINAL_ONLY)

Completion = tuple[list[int], list[float]]


def corpus_prompts() -> list[str]:
    """Passages of the default model's own corpus, from a few characters to a few hundred."""
    text = (DEFAULT_MODEL_DIR.parent / "corpus" / "tinyshakespeare.txt").read_text()
    rng = random.Random(0)
    starts = [rng.randrange(len(text) - 300) for _ in range(NUM_REQUESTS)]
    return [text[start:start + rng.randrange(3, 300)] for start in starts]


def completion(output) -> Completion:
    choice = output.outputs[0]
    return choice.token_ids, [next(iter(position.values())).logprob for position in choice.logprobs]


def together(engine: LLMEngine, prompts: list[str]) -> list[Completion]:
    """Each prompt's completion, the requests arriving a few per step."""
    results: dict[str, Completion] = {}
    waiting = list(enumerate(prompts))
    while waiting or engine.has_unfinished_requests():
        for index, prompt in waiting[:ARRIVALS_PER_STEP]:
            engine.add_request(str(index), prompt, GREEDY)
        waiting = waiting[ARRIVALS_PER_STEP:]
        results.update((output.request_id, completion(output)) for output in engine.step() if output.finished)
    return [results[str(index)] for index in range(len(prompts))]


@pytest.fixture(scope="module")
def kernels_built():
    assert wait_for_cpu_kernels(BUILD_WAIT_S) is not None, "the CPU kernels did not build; see the warning logged"


@pytest.fixture(params=[pytest.param("as-found", marks=pytest.mark.cpu_isa), "bfloat16-units-hidden"])
def cpu_flags(request, monkeypatch):
    """The CPU as it is, or as one without bfloat16 matrix units (the engine then computes in float32).

    Only the CPU as it is depends on the CPU the suite runs on, so only it is marked ``cpu_isa``.
    """
    if request.param == "bfloat16-units-hidden":
        monkeypatch.setenv(platforms.CPU_DISABLE_FLAGS_ENV, "avx512_bf16,amx_bf16")
    platforms._cpu_flags.cache_clear()
    yield
    monkeypatch.undo()
    platforms._cpu_flags.cache_clear()


def test_a_request_in_a_batch_of_32_computes_the_bits_it_computes_alone(kernels_built, cpu_flags):
    llm = LLM(max_num_batched_tokens=STEP_TOKENS)
    assert isinstance(llm.engine.linear_methods.layers, CpuKernelLinearMethod)
    assert llm.engine.runner.attention_backend.name == "cpu-kernel"
    prompts = corpus_prompts()
    batched = together(llm.engine, prompts)
    alone = [completion(llm.generate([prompt], GREEDY, use_tqdm=False)[0]) for prompt in prompts]
    differing = [index for index in range(NUM_REQUESTS) if batched[index] != alone[index]]
    assert differing == [], f"requests {differing} differ batched from alone"
