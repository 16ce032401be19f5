"""How ``autoglm bench latency`` shows a run: each side per prompt length, the ratio, the fraction of the bound."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from autoglm.bench.latency.measure import MS, DecodeBounds, LatencySettings, LengthComparison, latency_ratios
from autoglm.bench.results.profile_report import profile_table
from autoglm.bench.results.report import format_table, machine_info, write_json


def latency_table(comparisons: list[LengthComparison], bounds: DecodeBounds | None) -> str:
    header = ["input len", "side", "dtype", "weights", "TTFT mean (ms)", "TTFT median (ms)", "decode tok/s"]
    header += ["of bound"] if bounds is not None else []
    rows = []
    for comparison in comparisons:
        for side, result in comparison.sides():
            row = [str(comparison.input_len), side, result.compute_dtype, result.weight_format.label,
                   f"{result.mean_ttft_s * MS:.1f}", f"{result.median_ttft_s * MS:.1f}",
                   f"{result.decode_tokens_per_s:.1f}"]
            rows.append(row + ([f"{bounds.fraction(result):.1%}"] if bounds is not None else []))
        if comparison.baseline is not None:
            ratios = latency_ratios(comparison.engine, comparison.baseline)
            row = [str(comparison.input_len), "ratio", "", "", f"{ratios['ttft_speedup']:.2f}x", "",
                   f"{ratios['decode_tokens_per_s']:.2f}x"]
            rows.append(row + ([""] if bounds is not None else []))
    return format_table(header, rows, text_columns=4)


def latency_report(settings: LatencySettings, comparisons: list[LengthComparison],
                   bounds: DecodeBounds | None) -> dict[str, Any]:
    """Everything needed to read or reproduce the run, for ``--output-json``."""
    return {
        "settings": {
            "input_lens": settings.input_lens,
            "output_len": settings.output_len,
            "num_iters": settings.num_iters,
            "baseline": settings.baseline,
            "roofline": None if settings.roofline is None else str(settings.roofline),
            "engine": settings.config.model_dump(),
        },
        "machine": machine_info(),
        "input_lens": {str(c.input_len): c.to_dict(bounds) for c in comparisons},
    }


def report_latency(settings: LatencySettings, comparisons: list[LengthComparison], bounds: DecodeBounds | None,
                   output_json: Path | None) -> None:
    print(latency_table(comparisons, bounds))
    print(f"torch threads: {torch.get_num_threads()}; decode tok/s = (output tokens - 1) / (end to end - TTFT)")
    for comparison in comparisons:
        if comparison.engine.profile is not None:
            print(f"input {comparison.input_len}: {profile_table(comparison.engine.profile)}")
    if bounds is not None:
        print(f"of bound: decode tok/s over the batch-1 bandwidth bound of the weights each side reads, "
              f"from {settings.roofline} (measured on {bounds.roofline.device}, torch threads: {bounds.roofline.num_threads})")
    if output_json is not None:
        write_json(output_json, latency_report(settings, comparisons, bounds))
