"""``autoglm bench throughput``: the same requests through the engine and through transformers.

Both sides run in one process on one checkpoint with the same torch thread count, one after
the other (never both models in memory), and the report gives each side's rates and their ratio.
"""
from __future__ import annotations

import gc
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autoglm.bench.baseline import BATCH_SIZE, load_transformers_model, run_transformers_workload
from autoglm.bench.engine_run import run_engine_workload
from autoglm.bench.report import format_table, machine_info
from autoglm.bench.results import EngineThroughputResult, ThroughputResult, speedup
from autoglm.bench.workloads import Workload, build_workload, usable_token_ids
from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.llm import LLM
from autoglm.models import resolve_dtype

ENGINE_SIDE, BASELINE_SIDE = "autoglm", "transformers"


@dataclass(frozen=True)
class ThroughputSettings:
    config: AutoGLMConfig
    workloads: list[str]
    num_prompts: int
    baseline: str | None  # "transformers", or None to run the engine alone
    length_scale: float = 1.0


@dataclass(frozen=True)
class WorkloadComparison:
    """One workload's results on both sides; ``baseline`` is None when it was not run."""

    workload: Workload
    engine: EngineThroughputResult
    baseline: ThroughputResult | None

    def to_dict(self) -> dict[str, Any]:
        sides: dict[str, Any] = {ENGINE_SIDE: self.engine.to_dict()}
        if self.baseline is not None:
            sides[BASELINE_SIDE] = self.baseline.to_dict()
            sides["ratios"] = speedup(self.engine, self.baseline)
        return sides


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


def run_throughput(settings: ThroughputSettings) -> list[WorkloadComparison]:
    """Every workload through the engine, then, with the engine freed, through the baseline."""
    llm = LLM.from_config(settings.config)
    token_ids = prompt_token_ids(llm.engine)
    workloads = [
        build_workload(name, settings.num_prompts, token_ids, settings.config.seed, settings.length_scale)
        for name in settings.workloads
    ]
    engine_results = []
    for workload in workloads:
        engine_results.append(run_engine_workload(llm, workload))
        announce(workload, ENGINE_SIDE, engine_results[-1])
    model_path, model_config = llm.engine.model_path, llm.engine.model_config
    del llm
    gc.collect()
    baseline_results: list[ThroughputResult | None] = [None] * len(workloads)
    if settings.baseline == "transformers":
        model = load_transformers_model(model_path, resolve_dtype(settings.config.dtype, model_config))
        for index, workload in enumerate(workloads):
            baseline_results[index] = run_transformers_workload(model, workload)
            announce(workload, BASELINE_SIDE, baseline_results[index])
    return [WorkloadComparison(*sides) for sides in zip(workloads, engine_results, baseline_results)]


def throughput_table(comparisons: list[WorkloadComparison]) -> str:
    header = ["workload", "side", "requests", "prompt tok", "output tok", "time (s)", "output tok/s", "total tok/s"]
    rows = []
    for comparison in comparisons:
        name = comparison.workload.name
        sides = [(ENGINE_SIDE, comparison.engine), (BASELINE_SIDE, comparison.baseline)]
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
    return (
        f"{comparison.workload.name}: engine computes in {result.compute_dtype}, mean TTFT {result.mean_ttft_s:.3f} s, "
        f"{result.num_preemptions} preemptions, prefix cache hit rate {result.prefix_cache_hit_rate:.1%}"
    )


def throughput_report(settings: ThroughputSettings, comparisons: list[WorkloadComparison]) -> dict[str, Any]:
    """Everything needed to read or reproduce the run, for ``--output-json``."""
    return {
        "settings": {
            "workloads": settings.workloads,
            "num_prompts": settings.num_prompts,
            "baseline": settings.baseline,
            "baseline_batch_size": BATCH_SIZE,
            "length_scale": settings.length_scale,
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
    print(f"torch threads: {torch.get_num_threads()}")
    if output_json is not None:
        output_json.write_text(json.dumps(throughput_report(settings, comparisons), indent=2) + "\n")
        print(f"wrote {output_json}")
