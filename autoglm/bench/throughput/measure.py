"""``autoglm bench throughput``: the same requests through the engine and through transformers.

Both sides run in one process on one checkpoint with the same torch thread count, one after
the other (never both models in memory), and the report gives each side's rates and their ratio.
"""
from __future__ import annotations

import gc
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from autoglm.bench.lib.baseline import BATCH_SIZE, load_transformers_model, run_transformers_workload
from autoglm.bench.lib.engine_run import bench_llm, run_engine_workload
from autoglm.bench.results.profile_report import profile_table
from autoglm.bench.results.report import format_table, machine_info, write_json
from autoglm.bench.results.throughput import EngineThroughputResult, ThroughputResult, speedup
from autoglm.bench.lib.sampling import BenchSampling
from autoglm.bench.lib.workloads import SHARED_PREFIX, Workload, build_workload, usable_token_ids
from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.models import resolve_dtype

ENGINE_SIDE, BASELINE_SIDE, NO_CACHE_SIDE = "autoglm", "transformers", "autoglm (no prefix cache)"


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


def prompt_token_ids(engine: LLMEngine) -> list[int]:
    """Ids both the model and its tokenizer know, without special ones."""
    tokenizer = engine.tokenizer
    special = {*tokenizer.all_special_ids, *engine.eos_token_ids}
    if engine.model_config.bos_token_id is not None:
        special.add(engine.model_config.bos_token_id)
    return usable_token_ids(min(len(tokenizer), engine.model_config.vocab_size), special)


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


def throughput_table(comparisons: list[WorkloadComparison]) -> str:
    header = ["workload", "side", "requests", "prompt tok", "output tok", "time (s)", "output tok/s", "total tok/s"]
    rows = []
    for comparison in comparisons:
        name = comparison.workload.name
        sides = [(ENGINE_SIDE, comparison.engine), (NO_CACHE_SIDE, comparison.engine_without_cache),
                 (BASELINE_SIDE, comparison.baseline)]
        for side, result in sides:
            if result is not None:
                rows.append([
                    name, side, str(result.num_requests), str(result.prompt_tokens), str(result.output_tokens),
                    f"{result.elapsed_s:.2f}", f"{result.output_tokens_per_s:.1f}", f"{result.total_tokens_per_s:.1f}",
                ])
        if comparison.baseline is not None:
            ratios = speedup(comparison.engine, comparison.baseline)
            rows.append([name, "ratio", "", "", "", "",
                         f"{ratios['output_tokens_per_s']:.2f}x", f"{ratios['total_tokens_per_s']:.2f}x"])
    return format_table(header, rows, text_columns=2)


def engine_summary(comparison: WorkloadComparison) -> str:
    result = comparison.engine
    summary = (
        f"{comparison.workload.name}: engine computes in {result.compute_dtype} with {result.weights} weights and "
        f"kv_cache_dtype {result.kv_cache_dtype}, median TTFT "
        f"{result.median_ttft_s:.3f} s (mean {result.mean_ttft_s:.3f}), {result.num_preemptions} preemptions, "
        f"prefix cache hit rate {result.prefix_cache_hit_rate:.1%}"
    )
    if comparison.engine_without_cache is not None:
        summary += (
            f"; without prefix caching median TTFT {comparison.engine_without_cache.median_ttft_s:.3f} s, "
            f"{comparison.prefix_cache_ttft_speedup:.1f}x longer"
        )
    return summary


def throughput_report(settings: ThroughputSettings, comparisons: list[WorkloadComparison]) -> dict[str, Any]:
    """Everything needed to read or reproduce the run, for ``--output-json``."""
    return {
        "settings": {
            "workloads": settings.workloads,
            "num_prompts": settings.num_prompts,
            "baseline": settings.baseline,
            "baseline_batch_size": BATCH_SIZE,
            "length_scale": settings.length_scale,
            "profile": settings.profile,
            "sampling": asdict(settings.sampling),
            "engine": settings.config.model_dump(),
        },
        "machine": machine_info(),
        "workloads": {comparison.workload.name: comparison.to_dict() for comparison in comparisons},
    }


def report_throughput(settings: ThroughputSettings, comparisons: list[WorkloadComparison],
                      output_json: Path | None) -> None:
    print(throughput_table(comparisons))
    for comparison in comparisons:
        print(engine_summary(comparison))
        if comparison.engine.profile is not None:
            print(f"{comparison.workload.name}: {profile_table(comparison.engine.profile)}")
    print(f"torch threads: {torch.get_num_threads()}")
    if output_json is not None:
        write_json(output_json, throughput_report(settings, comparisons))
