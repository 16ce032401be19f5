"""``autoglm bench quant-accuracy``: what int8 and int4 weights cost the default model, on its held-out text.

For int8 and int4 the checkpoint is written as ``autoglm quantize`` writes it; w8a8 and w4a8, which a
checkpoint cannot hold (their activations are quantized as the engine runs), quantize the float
checkpoint as it loads. Each is reported on as ``autoglm quantize --report`` reports (perplexity through
the engine, next-token agreement and KL against the float model); docs/QUANTIZATION.md's accuracy table
is generated from the file this writes.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from autoglm.bench.results.report import machine_info
from autoglm.corpus import read_corpus
from autoglm.llm import LLM
from autoglm.model_paths import resolve_model_path
from autoglm.models.linear_method import WeightQuantization
from autoglm.perplexity import evaluate_perplexity
from autoglm.quantize.report import measure_report, report_lines
from autoglm.quantize.writer import quantize_checkpoint

METHODS = ("int8", "int4", "w8a8", "w4a8")


def measure_quant_accuracy(model: str | None, group_size: int | None) -> dict[str, Any]:
    model_dir = resolve_model_path(model)
    text = read_corpus().held_out
    before = evaluate_perplexity(LLM(model=str(model_dir)), text)
    reports = {}
    for method in METHODS:
        quantization = WeightQuantization.from_settings(method, group_size if method == "int4" else None)
        if quantization.int8_activations:
            settings = {"quantization": method, "quantization_group_size": quantization.weight_format.group_size}
            report = measure_report(model_dir, model_dir, quantization, method, text, before, settings)
        else:
            with tempfile.TemporaryDirectory() as out_dir:
                quantize_checkpoint(model_dir, out_dir, quantization)
                report = measure_report(model_dir, Path(out_dir), quantization, method, text, before)
        print(f"--- {method}\n" + "\n".join(report_lines(report)))
        reports[method] = report.to_dict()
    return {"model": str(model_dir), "text": "held-out Tiny Shakespeare", "reports": reports, "machine": machine_info()}
