"""``autoglm bench compare-llamacpp``: for each precision, llama.cpp's ``llama-bench`` on its GGUF and the
engine's offline ``LLM`` on the same checkpoint's weights, on the same number of threads.

Every GGUF is benchmarked first, so that a llama.cpp failure or a file of the wrong type stops the command
before the engine loads. The engine then measures what llama-bench does, one request at a time after a
warm-up: ``tg`` as the decode rate of ``n_gen`` tokens after a short prompt's first one, ``pp`` as ``n_prompt``
tokens over the time to the first token. ``LLM`` waits for the compiled kernels before its first step, so no
timed step includes their build.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoglm.bench.lib.batch_one import LatencyResult, engine_latency, latency_requests
from autoglm.bench.lib.engine_run import bench_llm, decode_weight_format, prompt_token_ids
from autoglm.bench.llamacpp.inputs import CompareLlamaCppError
from autoglm.bench.llamacpp.llama_bench import LlamaBenchRun, run_llama_bench
from autoglm.bench.llamacpp.precisions import PRECISIONS, Precision
from autoglm.bench.results.roofline import count_weights
from autoglm.config import AutoGLMConfig
from autoglm.model_paths import resolve_model_path

DECODE_PROMPT_TOKENS = 8  # llama-bench's tg starts from an empty context; the engine's request needs a prompt
PARAMS_TOLERANCE = 0.01  # llama-bench prints parameters to two decimals of millions or billions


@dataclass(frozen=True)
class CompareSettings:
    config: AutoGLMConfig  # the engine's, its num_threads set to ``threads``
    llama_bench: Path
    ggufs: dict[str, Path]  # precision name -> GGUF of the checkpoint's weights
    threads: int
    n_prompt: int
    n_gen: int
    repetitions: int  # timed runs per test on each side; the engine warms up once before them

    @property
    def prompt_test(self) -> str:
        return f"pp{self.n_prompt}"

    @property
    def decode_test(self) -> str:
        return f"tg{self.n_gen}"


@dataclass(frozen=True)
class EngineSide:
    settings: dict[str, Any]  # the weight settings of the precision
    weights: str  # what its decode steps read, e.g. ``int8, int8 head``
    decode: LatencyResult  # short prompts, ``n_gen`` tokens after the first
    prompt: LatencyResult  # prompts of ``prompt_tokens``, one token generated
    prompt_tokens: int

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode.decode_tokens_per_s

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prompt.mean_ttft_s

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, "weights": self.weights, "decode": self.decode.to_dict(),
                "prompt": {"input_len": self.prompt_tokens, "ttft_s": self.prompt.ttft_s,
                           "mean_ttft_s": self.prompt.mean_ttft_s},
                "decode_tokens_per_s": self.decode_tokens_per_s, "prompt_tokens_per_s": self.prompt_tokens_per_s}


@dataclass(frozen=True)
class PrecisionComparison:
    precision: Precision
    llama_cpp: LlamaBenchRun
    engine: EngineSide
    prompt_test: str  # llama-bench's names of the two tests, e.g. pp512 and tg128
    decode_test: str

    def ratios(self) -> dict[str, float]:
        """The engine's rate over llama.cpp's: above 1 where the engine is faster."""
        return {"decode": self.engine.decode_tokens_per_s / self.llama_cpp.rate(self.decode_test),
                "prompt": self.engine.prompt_tokens_per_s / self.llama_cpp.rate(self.prompt_test)}

    def to_dict(self) -> dict[str, Any]:
        return {"gguf_type": self.precision.gguf_type, "llama_cpp": {
            **self.llama_cpp.to_dict(), "decode_tokens_per_s": self.llama_cpp.rate(self.decode_test),
            "prompt_tokens_per_s": self.llama_cpp.rate(self.prompt_test)},
            "engine": self.engine.to_dict(), "ratios": self.ratios()}


def llama_cpp_side(settings: CompareSettings, precision: Precision) -> LlamaBenchRun:
    gguf = settings.ggufs[precision.name]
    run = run_llama_bench(settings.llama_bench, gguf, settings.threads, settings.n_prompt, settings.n_gen,
                          settings.repetitions)
    if run.file_type != precision.gguf_type:
        raise CompareLlamaCppError(f"--gguf {precision.name}={gguf}: llama.cpp reads it as {run.file_type}; "
                                   f"{precision.name} compares with a {precision.gguf_type} file")
    print(f"{precision.name} / llama.cpp ({run.model_type}): {run.rate(settings.decode_test):.1f} tok/s decode, "
          f"{run.rate(settings.prompt_test):.1f} tok/s prompt", flush=True)
    return run


def engine_side(settings: CompareSettings, precision: Precision) -> EngineSide:
    llm = bench_llm(settings.config.model_copy(update=precision.engine_settings))
    engine = llm.engine
    longest = max(settings.n_prompt + 1, DECODE_PROMPT_TOKENS + settings.n_gen + 1)
    if longest > engine.max_context_len:
        raise CompareLlamaCppError(f"--n-prompt {settings.n_prompt} and --n-gen {settings.n_gen} need {longest} "
                                   f"positions; the model holds {engine.max_context_len}")
    token_ids, seed, count = prompt_token_ids(engine), settings.config.seed, settings.repetitions + 1
    decode = engine_latency(llm, latency_requests(token_ids, DECODE_PROMPT_TOKENS, settings.n_gen + 1, count, seed))
    prompt = engine_latency(llm, latency_requests(token_ids, settings.n_prompt, 1, count, seed))
    side = EngineSide(precision.engine_settings, decode_weight_format(engine).label, decode, prompt,
                      settings.n_prompt)
    print(f"{precision.name} / engine ({side.weights}): {side.decode_tokens_per_s:.1f} tok/s decode, "
          f"{side.prompt_tokens_per_s:.1f} tok/s prompt", flush=True)
    del llm, engine
    gc.collect()
    return side


def warn_of_other_weights(run: LlamaBenchRun, checkpoint_params: int) -> None:
    """A GGUF whose parameter count differs from the checkpoint's (beyond llama-bench's rounding) holds another
    model: the comparison runs, saying so."""
    if abs(run.param_count / checkpoint_params - 1) > PARAMS_TOLERANCE:
        print(f"warning: {run.gguf} holds {run.params} parameters and the checkpoint "
              f"{checkpoint_params / 1e6:,.2f} M: not the same weights, so the two sides are not comparable",
              flush=True)


def run_comparison(settings: CompareSettings) -> list[PrecisionComparison]:
    precisions = [PRECISIONS[name] for name in settings.ggufs]
    llama_cpp = [llama_cpp_side(settings, precision) for precision in precisions]
    checkpoint_params = count_weights(resolve_model_path(settings.config.model)).total_params
    for run in llama_cpp:
        warn_of_other_weights(run, checkpoint_params)
    return [PrecisionComparison(precision, run, engine_side(settings, precision), settings.prompt_test,
                                settings.decode_test)
            for precision, run in zip(precisions, llama_cpp)]
