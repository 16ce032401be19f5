"""``autoglm bench quant-accuracy``: its options, and the measurement from settings to reports and JSON."""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_quantized_model_command


def _quant_accuracy(args: argparse.Namespace) -> int:
    from autoglm.bench.quant_accuracy.measure import measure_quant_accuracy
    from autoglm.bench.quant_accuracy.report import report_quant_accuracy

    report_quant_accuracy(measure_quant_accuracy(args.model, args.group_size), args.output_json)
    return 0


def add_quant_accuracy_command(subparsers) -> None:
    add_quantized_model_command(subparsers, "quant-accuracy", "perplexity, top-1 agreement and KL of int8/int4 "
                                "weights on the held-out text", _quant_accuracy)
