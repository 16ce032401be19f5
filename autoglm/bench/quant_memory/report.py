"""How ``autoglm bench quant-memory`` shows each variant's bytes against the float model's, here and in the docs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autoglm.bench.quant_memory.measure import FLOAT, ModelMemory
from autoglm.bench.results.report import format_table, print_and_write


MEMORY_HEADER = ["weights", "quantized layers (MiB)", "vs float", "largest layer vs float", "whole model (MiB)",
                 "vs float"]


def memory_rows(document: dict[str, Any]) -> list[list[str]]:
    """One row per variant: its quantized layers' bytes against the same layers' in the float model (in all,
    and the layer that kept the most), and the whole model's bytes against the float model's."""
    variants = [ModelMemory(**variant) for variant in document["variants"]]
    float_model = next(variant for variant in variants if variant.quantization == FLOAT)
    rows = [[float_model.label, "", "", "", f"{float_model.total_bytes / 2**20:,.1f}", ""]]
    for variant in variants:
        if variant is float_model:
            continue
        names = variant.quantized_layers
        quantized = sum(variant.layer_bytes[name] for name in names)
        in_float = sum(float_model.layer_bytes[name] for name in names)
        largest = max(variant.layer_bytes[name] / float_model.layer_bytes[name] for name in names)
        rows.append([variant.label, f"{quantized / 2**20:,.1f}", f"{quantized / in_float:.3f}x", f"{largest:.3f}x",
                     f"{variant.total_bytes / 2**20:,.1f}", f"{variant.total_bytes / float_model.total_bytes:.3f}x"])
    return rows


def report_quant_memory(results: dict[str, Any], output_json: Path | None) -> None:
    print_and_write([format_table(MEMORY_HEADER, memory_rows(results))], results, output_json)
