"""``autoglm bench throughput``: the same requests through the engine and through transformers.

Both sides run in one process on one checkpoint with the same torch thread count, one after
the other (never both models in memory), and the report gives each side's rates and their ratio.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from autoglm.bench.lib.baseline import load_transformers_model, run_transformers_workload
from autoglm.bench.lib.engine_run import BASELINE_SIDE, ENGINE_SIDE, bench_llm, prompt_token_ids, run_engine_workload
from autoglm.bench.lib.sampling import BenchSampling
from autoglm.bench.lib.workloads import SHARED_PREFIX, Workload, build_workload
from autoglm.bench.results.throughput import EngineThroughputResult, ThroughputResult, speedup
from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.models import resolve_dtype

NO_CACHE_SIDE = "autoglm (no prefix cache)"


@dataclass(frozen=True)
class ThroughputSettings:
    config: AutoGLMConfig
    workloads: list[str]
    num_prompts: int | None  # None: each workload's own default
    baseline: str | None  # "transformers", or None to run the engine alone
    length_scale: float = 1.0
    profile: bool = False  # time each phase of the engine's steps
    sampling: BenchSampling = BenchSampling()


@dataclass(frozen=True)
class WorkloadComparison:
    """One workload's results on each side that ran it; ``None`` where a side did not run.

    ``engine_without_cache`` is the engine again with prefix caching off, for the shared-prefix workload.
    """

    workload: Workload
    engine: EngineThroughputResult
    baseline: ThroughputResult | None
    engine_without_cache: EngineThroughputResult | None = None

    def to_dict(self) -> dict[str, Any]:
        sides: dict[str, Any] = {ENGINE_SIDE: self.engine.to_dict()}
        if self.engine_without_cache is not None:
            sides[NO_CACHE_SIDE] = self.engine_without_cache.to_dict()
            sides["prefix_cache_ttft_speedup"] = self.prefix_cache_ttft_speedup
        if self.baseline is not None:
            sides[BASELINE_SIDE] = self.baseline.to_dict()
            sides["ratios"] = speedup(self.engine, self.baseline)
        return sides

    @property
    def prefix_cache_ttft_speedup(self) -> float | None:
        """Median TTFT without prefix caching over median TTFT with it."""
        if self.engine_without_cache is None:
            return None
        return self.engine_without_cache.median_ttft_s / self.engine.median_ttft_s


def announce(workload: Workload, side: str, result: ThroughputResult) -> None:
    """One line as each side finishes a workload: a long run shows progress, a stopped one keeps its numbers."""
    print(
        f"{workload.name} / {side}: {result.output_tokens} output tokens in {result.elapsed_s:.1f} s "
        f"({result.output_tokens_per_s:.1f} output tok/s, {result.total_tokens_per_s:.1f} total tok/s)",
        flush=True,
    )


def run_engine_side(config: AutoGLMConfig, names: list[str], settings: ThroughputSettings,
                    ) -> tuple[list[Workload], list[EngineThroughputResult], LLMEngine]:
    """The named workloads through one engine built from ``config``; the engine is returned for its paths."""
    llm = bench_llm(config)
    if settings.profile:
        llm.engine.enable_profiling()
    token_ids = prompt_token_ids(llm.engine)
    workloads = [
        build_workload(name, settings.num_prompts, token_ids, config.seed, settings.length_scale) for name in names
    ]
    results = []
    for workload in workloads:
        results.append(run_engine_workload(llm, workload, settings.sampling))
        side = ENGINE_SIDE if config.enable_prefix_caching else NO_CACHE_SIDE
        announce(workload, side, results[-1])
    return workloads, results, llm.engine


def run_throughput(settings: ThroughputSettings) -> list[WorkloadComparison]:
    """Every workload through the engine; the shared-prefix one again with prefix caching off
    (when the engine had it on); then the baseline. One model is in memory at a time."""
    workloads, engine_results, engine = run_engine_side(settings.config, settings.workloads, settings)
    model_path, model_config, device = engine.model_path, engine.model_config, engine.device
    del engine
    gc.collect()
    without_cache: list[EngineThroughputResult | None] = [None] * len(workloads)
    if SHARED_PREFIX in settings.workloads and settings.config.enable_prefix_caching:
        no_cache_config = settings.config.model_copy(update={"enable_prefix_caching": False})
        _, (result,), _ = run_engine_side(no_cache_config, [SHARED_PREFIX], settings)
        without_cache[settings.workloads.index(SHARED_PREFIX)] = result
        gc.collect()
    baseline_results: list[ThroughputResult | None] = [None] * len(workloads)
    if settings.baseline == "transformers":
        model = load_transformers_model(model_path, resolve_dtype(settings.config.dtype, model_config), device)
        for index, workload in enumerate(workloads):
            baseline_results[index] = run_transformers_workload(model, workload, sampling=settings.sampling)
            announce(workload, BASELINE_SIDE, baseline_results[index])
    return [WorkloadComparison(*sides) for sides in zip(workloads, engine_results, baseline_results, without_cache)]
