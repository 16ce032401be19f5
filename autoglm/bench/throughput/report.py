"""How ``autoglm bench throughput`` shows a run: each side's rates and their ratio, and the results file."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from autoglm.bench.lib.baseline import BATCH_SIZE
from autoglm.bench.lib.engine_run import BASELINE_SIDE, ENGINE_SIDE
from autoglm.bench.results.profile_report import profile_table
from autoglm.bench.results.report import format_table, machine_info, write_json
from autoglm.bench.results.throughput import speedup
from autoglm.bench.throughput.measure import NO_CACHE_SIDE, ThroughputSettings, WorkloadComparison


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
