"""``autoglm bench latency``: its options, and the run from settings to table and JSON."""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.bench.lib.arguments import (
    add_baseline_flag,
    add_profile_flag,
    add_results_and_engine_settings,
    chosen_baseline,
)
from autoglm.cli.settings import announced_config


def _lengths(text: str) -> list[int]:
    """``128,512,2048``: positive token counts."""
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return lengths


def _latency(args: argparse.Namespace) -> int:
    from autoglm.bench.latency.measure import LatencySettings, decode_bounds, run_latency
    from autoglm.bench.latency.report import report_latency

    config = announced_config(args)
    settings = LatencySettings(
        config=config,
        input_lens=args.input_lens,
        output_len=args.output_len,
        num_iters=args.num_iters,
        baseline=chosen_baseline(args),
        roofline=args.roofline,
        profile=args.profile,
    )
    bounds = decode_bounds(settings)
    report_latency(settings, run_latency(settings), bounds, args.output_json)
    return 0


def add_latency_command(subparsers) -> None:
    parser = subparsers.add_parser("latency", help="batch-1 time to first token and decode speed against transformers")
    parser.add_argument("--input-lens", type=_lengths, default=[128, 512, 2048],
                        help="prompt lengths (default: 128,512,2048)")
    parser.add_argument("--output-len", type=int, default=128,
                        help="tokens generated per request (default: %(default)s)")
    parser.add_argument("--num-iters", type=int, default=3,
                        help="timed requests per prompt length, after a warm-up (default: %(default)s)")
    add_baseline_flag(parser)
    parser.add_argument("--roofline", type=Path, help="a `bench roofline --output-json` file: adds fraction of bound")
    add_profile_flag(parser)
    add_results_and_engine_settings(parser, "also write the results and settings to this file")
    parser.set_defaults(handler=_latency)
