"""``autoglm bench roofline``: its options, and the measurement from settings to table and JSON."""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.bench.lib.arguments import CHECKPOINT_DTYPES, add_num_threads_flag, use_num_threads


def _roofline(args: argparse.Namespace) -> int:
    from autoglm.bench.roofline.measure import FULL_SIZES, QUICK_SIZES, measure_roofline
    from autoglm.bench.roofline.report import report_roofline
    from autoglm.platforms import resolve_device

    use_num_threads(args)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    report_roofline(measure_roofline(resolve_device(args.device), args.dtype, sizes, args.model), args.output_json)
    return 0


def add_roofline_command(subparsers) -> None:
    parser = subparsers.add_parser("roofline", help="memory bandwidth and matmul speed, and a model's speed bounds")
    parser.add_argument("--model", help="checkpoint folder to bound: batch-1 decode and batched tokens per second")
    parser.add_argument("--device", default="cpu",
                        help="'cpu', 'cuda', 'cuda:N', 'xpu', 'mps' or 'auto' (default: %(default)s)")
    parser.add_argument("--dtype", default="bfloat16", choices=CHECKPOINT_DTYPES,
                        help="the dtype asked of the engine; bounds are given for the one it computes in, and more "
                             "(default: %(default)s)")
    add_num_threads_flag(parser)
    parser.add_argument("--quick", action="store_true", help="tiny sizes that check the command, not the machine")
    parser.add_argument("--output-json", type=Path, help="also write the results, for `bench latency --roofline`")
    parser.set_defaults(handler=_roofline)
