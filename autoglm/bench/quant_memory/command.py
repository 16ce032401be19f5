"""``autoglm bench quant-memory``: its options, and the measurement from settings to table and JSON."""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_quantized_model_command


def _quant_memory(args: argparse.Namespace) -> int:
    from autoglm.bench.quant_memory.measure import measure_quant_memory
    from autoglm.bench.quant_memory.report import report_quant_memory

    report_quant_memory(measure_quant_memory(args.model, args.group_size), args.output_json)
    return 0


def add_quant_memory_command(subparsers) -> None:
    add_quantized_model_command(subparsers, "quant-memory", "bytes the engine's model holds in float, int8 and "
                                "int4, the LM head quantized or not", _quant_memory)
