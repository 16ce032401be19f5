"""One request at a time through the engine, as ``bench latency`` and ``bench compare-llamacpp`` time it:
distinct random prompts, a warm-up, then each request's time to first token and to its last token."""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from statistics import mean, median
from typing import Any

from autoglm.bench.lib.engine_run import decode_weight_format
from autoglm.bench.lib.workloads import BenchRequest, Workload
from autoglm.bench.results.report import dtype_name
from autoglm.bench.results.roofline import WeightFormat
from autoglm.llm import LLM
from autoglm.outputs import RequestOutput
from autoglm.profiling import StepProfile
from autoglm.sampling_params import SamplingParams


@dataclass(frozen=True)
class LatencyResult:
    """One side's timed requests at one prompt length; times run from submission."""

    compute_dtype: str
    weight_dtype: str  # what a decode step reads its weights as: the bound's dtype
    output_len: int
    ttft_s: list[float]
    e2e_s: list[float]  # until the last token
    profile: StepProfile | None = None  # the engine's steps over the timed requests, with ``--profile``
    weight_group_size: int | None = None  # int8/int4: input columns per scale; None: one per output row
    lm_head_weight_dtype: str | None = None  # None: as ``weight_dtype``

    @property
    def weight_format(self) -> WeightFormat:
        return WeightFormat(self.weight_dtype, self.weight_group_size, self.lm_head_weight_dtype)

    @property
    def mean_ttft_s(self) -> float:
        return mean(self.ttft_s)

    @property
    def median_ttft_s(self) -> float:
        return median(self.ttft_s)

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens after the first over the time they took, from mean times: one noisy request skews it less."""
        decode_s = mean(self.e2e_s) - self.mean_ttft_s
        if decode_s <= 0:
            raise RuntimeError(f"{self.output_len} tokens took no longer than the first one; raise --output-len")
        return (self.output_len - 1) / decode_s

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "profile": None if self.profile is None else self.profile.to_dict(),
            "mean_ttft_s": self.mean_ttft_s,
            "median_ttft_s": self.median_ttft_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
        }




def latency_requests(token_ids: list[int], input_len: int, output_len: int, count: int,
                     seed: int) -> list[BenchRequest]:
    """Distinct random prompts: a repeated one would be served from the engine's prefix cache."""
    rng = random.Random(f"latency:{input_len}:{seed}")
    return [BenchRequest(rng.choices(token_ids, k=input_len), output_len) for _ in range(count)]


def engine_latency(llm: LLM, requests: list[BenchRequest]) -> LatencyResult:
    """Each request alone, timed by the engine's own metrics; the first one only warms up
    (and a profiling engine forgets its steps)."""

    def generate(request: BenchRequest) -> RequestOutput:
        params = SamplingParams(temperature=0.0, max_tokens=request.max_tokens, ignore_eos=True)
        return llm.generate(request.prompt_token_ids, params, use_tqdm=False)[0]

    warm_up, timed = requests[0], requests[1:]
    generate(warm_up)
    profiler = llm.engine.profiler
    profiler.reset()
    outputs = [generate(request) for request in timed]
    Workload("latency", timed).check_output_lengths([len(o.outputs[0].token_ids) for o in outputs], "the engine")
    metrics = [output.metrics for output in outputs]
    weight_format = decode_weight_format(llm.engine)
    return LatencyResult(
        compute_dtype=dtype_name(llm.engine.dtype),
        weight_dtype=weight_format.dtype,
        output_len=requests[0].max_tokens,
        ttft_s=[m.first_token_time - m.arrival_time for m in metrics],
        e2e_s=[m.finished_time - m.arrival_time for m in metrics],
        profile=profiler.result(),
        weight_group_size=weight_format.group_size,
        lm_head_weight_dtype=weight_format.lm_head_dtype,
    )


