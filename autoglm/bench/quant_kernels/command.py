"""``autoglm bench quant-kernels``: its options, and the timings from settings to table and JSON."""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.bench.lib.arguments import add_num_threads_flag, use_num_threads


def _quant_kernels(args: argparse.Namespace) -> int:
    import torch

    from autoglm.bench.quant_kernels.measure import QWEN_05B_LAYER_SHAPES, ROW_COUNTS, measure
    from autoglm.bench.quant_kernels.report import report_quant_kernels

    use_num_threads(args)
    shapes, rows = ((QWEN_05B_LAYER_SHAPES[0],), (1, 3)) if args.quick else (QWEN_05B_LAYER_SHAPES, ROW_COUNTS)
    # Many short rounds: the best of them is the one a busy machine disturbed least.
    timings = measure(shapes, rows, getattr(torch, args.dtype), repeats=2 if args.quick else 7,
                      min_round_s=0.005 if args.quick else 0.03)
    report_quant_kernels(timings, args.output_json)
    return 0


def add_quant_kernels_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "quant-kernels", help="int8/int4 weight matmul candidates per row count on qwen2.5-0.5b's layer shapes (CPU)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"),
                        help="activation dtype; the fused int8/int4 ops take bfloat16 wherever a bfloat16 model runs "
                             "(default: %(default)s)")
    add_num_threads_flag(parser)
    parser.add_argument("--quick", action="store_true", help="one small shape, two row counts: checks the command")
    parser.add_argument("--output-json", type=Path, help="also write the timings to this file")
    parser.set_defaults(handler=_quant_kernels)
