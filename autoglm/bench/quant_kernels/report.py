"""How ``autoglm bench quant-kernels`` shows its timings: a table per shape, kernel and row count, and the file."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from autoglm.bench.quant_kernels.measure import KernelTiming
from autoglm.bench.results.report import format_table, machine_info, write_json


def timings_table(timings: list[KernelTiming]) -> str:
    rows = [[f"{t.out_features}x{t.in_features}", t.kernel, str(t.rows), f"{t.seconds * 1e6:.0f}",
             f"{t.weight_gb_per_s:.1f}"] for t in timings]
    return format_table(["shape [out x in]", "kernel", "rows", "us/call", "weight GB/s"], rows, text_columns=2)


def report_quant_kernels(timings: list[KernelTiming], output_json: Path | None) -> None:
    print(f"torch threads: {torch.get_num_threads()}")
    print(timings_table(timings))
    if output_json is not None:
        write_json(output_json, {"timings": [asdict(t) for t in timings], "machine": machine_info(),
                                 "num_threads": torch.get_num_threads()})
