"""``autoglm bench latency``: what one user waits for, the first token and each one after it.

One request at a time (batch 1), for each prompt length: the engine first, then, with the
engine freed, transformers on the same checkpoint, device and prompts. A saved roofline turns
each decode rate into a fraction of the bandwidth bound, the most batch 1 could reach.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from autoglm.bench.lib.baseline import generate_batch, load_transformers_model
from autoglm.bench.lib.batch_one import LatencyResult, engine_latency, latency_requests
from autoglm.bench.lib.engine_run import BASELINE_SIDE, ENGINE_SIDE, bench_llm, prompt_token_ids
from autoglm.bench.lib.timing import timed_seconds
from autoglm.bench.lib.workloads import BenchRequest
from autoglm.bench.results.report import dtype_name
from autoglm.bench.results.roofline import ModelWeights, Roofline, count_weights, load_roofline
from autoglm.config import AutoGLMConfig
from autoglm.model_paths import resolve_model_path
from autoglm.models import resolve_dtype

MS = 1e3


@dataclass(frozen=True)
class LatencySettings:
    config: AutoGLMConfig
    input_lens: list[int]
    output_len: int
    num_iters: int  # timed requests per prompt length, after one warm-up
    baseline: str | None  # "transformers", or None to run the engine alone
    roofline: Path | None = None
    profile: bool = False  # time each phase of the engine's steps


@dataclass(frozen=True)
class DecodeBounds:
    """A saved roofline applied to the benchmarked checkpoint."""

    roofline: Roofline
    weights: ModelWeights

    def bound_tokens_per_s(self, result: LatencyResult) -> float:
        return self.roofline.decode_bound(self.weights, result.weight_format)

    def fraction(self, result: LatencyResult) -> float:
        return self.roofline.decode_fraction(result.decode_tokens_per_s, self.weights, result.weight_format)


def latency_ratios(engine: LatencyResult, baseline: LatencyResult) -> dict[str, float]:
    """Above 1 where the engine is faster: TTFT speed-up and decode rate ratio."""
    return {
        "ttft_speedup": baseline.mean_ttft_s / engine.mean_ttft_s,
        "decode_tokens_per_s": engine.decode_tokens_per_s / baseline.decode_tokens_per_s,
    }


@dataclass(frozen=True)
class LengthComparison:
    """Both sides at one prompt length; ``baseline`` is None when it was not run."""

    input_len: int
    engine: LatencyResult
    baseline: LatencyResult | None

    def sides(self) -> list[tuple[str, LatencyResult]]:
        both = [(ENGINE_SIDE, self.engine), (BASELINE_SIDE, self.baseline)]
        return [(side, result) for side, result in both if result is not None]

    def to_dict(self, bounds: DecodeBounds | None) -> dict[str, Any]:
        report: dict[str, Any] = {}
        for side, result in self.sides():
            report[side] = result.to_dict()
            if bounds is not None:
                report[side]["decode_bound_tokens_per_s"] = bounds.bound_tokens_per_s(result)
                report[side]["decode_fraction_of_bound"] = bounds.fraction(result)
        if self.baseline is not None:
            report["ratios"] = latency_ratios(self.engine, self.baseline)
        return report


def generate_seconds(model: PreTrainedModel, request: BenchRequest) -> float:
    # The batch's tensors come from factory functions, which follow the default device.
    with torch.device(model.device):
        return timed_seconds(lambda: generate_batch(model, [request]), model.device)


def transformers_latency(model: PreTrainedModel, requests: list[BenchRequest]) -> LatencyResult:
    """TTFT is a 1-token generate; a full generate minus it is the decode time. The first request warms up."""
    ttft_s = [generate_seconds(model, replace(request, max_tokens=1)) for request in requests][1:]
    e2e_s = [generate_seconds(model, request) for request in requests][1:]
    return LatencyResult(dtype_name(model.dtype), dtype_name(model.dtype), requests[0].max_tokens, ttft_s, e2e_s)


def announce(input_len: int, side: str, result: LatencyResult) -> None:
    print(f"input {input_len} / {side}: TTFT {result.mean_ttft_s * MS:.1f} ms, "
          f"decode {result.decode_tokens_per_s:.1f} tok/s", flush=True)


def run_latency(settings: LatencySettings) -> list[LengthComparison]:
    if settings.output_len < 2 or settings.num_iters < 1:
        raise ValueError("latency needs --output-len of at least 2 (decode is timed after the first token) "
                         "and --num-iters of at least 1")
    llm = bench_llm(settings.config)
    engine = llm.engine
    if settings.profile:
        engine.enable_profiling()
    token_ids = prompt_token_ids(engine)
    requests = {}
    for input_len in settings.input_lens:
        if input_len + settings.output_len > engine.max_context_len:
            print(f"skipping input length {input_len}: with {settings.output_len} output tokens it exceeds "
                  f"the maximum context length of {engine.max_context_len}")
            continue
        requests[input_len] = latency_requests(token_ids, input_len, settings.output_len,
                                               settings.num_iters + 1, settings.config.seed)
    engine_results = {}
    for input_len, length_requests in requests.items():
        engine_results[input_len] = engine_latency(llm, length_requests)
        announce(input_len, ENGINE_SIDE, engine_results[input_len])
    model_path, model_config, device = engine.model_path, engine.model_config, engine.device
    del llm, engine
    gc.collect()
    baseline_results: dict[int, LatencyResult] = {}
    if settings.baseline == "transformers" and requests:
        dtype = resolve_dtype(settings.config.dtype, model_config)
        model = load_transformers_model(model_path, dtype, device)
        for input_len, length_requests in requests.items():
            baseline_results[input_len] = transformers_latency(model, length_requests)
            announce(input_len, BASELINE_SIDE, baseline_results[input_len])
    return [LengthComparison(n, engine_results[n], baseline_results.get(n)) for n in requests]


def decode_bounds(settings: LatencySettings) -> DecodeBounds | None:
    """Read before the run, so that a bad roofline file fails fast."""
    if settings.roofline is None:
        return None
    return DecodeBounds(load_roofline(settings.roofline), count_weights(resolve_model_path(settings.config.model)))
