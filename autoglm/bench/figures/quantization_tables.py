"""The tables of docs/QUANTIZATION.md: weight quantization's accuracy and memory, and the kernel measurement."""
from __future__ import annotations

import math

from autoglm.bench.figures.tables import caption
from autoglm.bench.quant_memory.report import MEMORY_HEADER, memory_rows
from autoglm.bench.results.formats import markdown_table
from autoglm.bench.results.results_files import ResultsFile

WEIGHT_NAMES = {"int8": "int8 (per channel)", "int4": "int4 (groups of {group_size})",
                "w8a8": "w8a8: int8 (per channel), int8 activations", "w4a8": "w4a8: int4 (groups of {group_size}), int8 activations"}


def quant_accuracy(accuracy: ResultsFile) -> str:
    """A ``bench quant-accuracy`` file: the float checkpoint's row, then one row per method."""
    reports = accuracy.at("reports")
    before = next(iter(reports.values()))["before"]
    header = ["weights", "nats/char", "perplexity", "change", "top-1 agreement", "mean KL (nats)"]
    rows = [["checkpoint (bfloat16)", f"{before['loss_per_character']:.4f}",
             f"{math.exp(before['loss_per_token']):.3f}", "", "", ""]]
    for method, report in reports.items():
        after, agreement = report["after"], report["agreement"]
        rows.append([WEIGHT_NAMES[method].format(group_size=report["group_size"]),
                     f"{after['loss_per_character']:.4f}", f"{math.exp(after['loss_per_token']):.3f}",
                     f"{report['perplexity_change']:+.2%}", f"{agreement['top1_agreement']:.2%}",
                     f"{agreement['mean_kl_divergence']:.5f}"])
    positions = next(iter(reports.values()))["agreement"]["positions"]
    note = f"\n\nTop-1 agreement and KL: next-token distributions against the checkpoint's over {positions} positions."
    return caption(accuracy) + markdown_table(header, rows) + note


def quant_kernels(kernels: ResultsFile) -> str:
    """A ``bench quant-kernels`` file: microseconds per call, one row per layer shape and kernel, a column per row count."""
    timings = kernels.at("timings")
    row_counts = sorted({timing["rows"] for timing in timings})
    cells: dict[tuple[str, str], dict[int, float]] = {}
    for timing in timings:
        key = (f"{timing['out_features']}x{timing['in_features']}", timing["kernel"])
        cells.setdefault(key, {})[timing["rows"]] = timing["seconds"]
    rows = [[shape, kernel, *(f"{seconds[m] * 1e6:,.0f}" if m in seconds else "" for m in row_counts)]
            for (shape, kernel), seconds in cells.items()]
    header = ["layer [out x in]", "kernel", *(f"{m} rows (us)" for m in row_counts)]
    return caption(kernels) + markdown_table(header, rows, text_columns=2)


def quant_memory(memory: ResultsFile) -> str:
    """A ``bench quant-memory`` file: the quantized layers' and the whole model's bytes against the float model's."""
    return caption(memory) + markdown_table(MEMORY_HEADER, memory_rows(memory.data), text_columns=1)
