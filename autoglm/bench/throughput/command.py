"""``autoglm bench throughput``: its options, and the run from settings to table and JSON."""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import (
    add_baseline_flag,
    add_profile_flag,
    add_results_and_engine_settings,
    chosen_baseline,
)
from autoglm.bench.lib.sampling import BenchSampling, add_sampling_arguments
from autoglm.bench.lib.workloads import WORKLOADS
from autoglm.cli.settings import announced_config

ALL_WORKLOADS = "all"


def _throughput(args: argparse.Namespace) -> int:
    from autoglm.bench.throughput.measure import ThroughputSettings, run_throughput
    from autoglm.bench.throughput.report import report_throughput

    config = announced_config(args)
    settings = ThroughputSettings(
        config=config,
        workloads=list(WORKLOADS) if args.workload == ALL_WORKLOADS else [args.workload],
        num_prompts=args.num_prompts,
        baseline=chosen_baseline(args),
        length_scale=args.length_scale,
        profile=args.profile,
        sampling=BenchSampling.from_args(args),
    )
    report_throughput(settings, run_throughput(settings), args.output_json)
    return 0


def add_throughput_command(subparsers) -> None:
    parser = subparsers.add_parser("throughput", help="tokens per second of the engine against transformers")
    parser.add_argument("--workload", default=ALL_WORKLOADS, choices=[*WORKLOADS, ALL_WORKLOADS],
                        help="which request mix to run (default: %(default)s)")
    parser.add_argument("--num-prompts", type=int,
                        help="requests per workload (default: 64 each, 32 for shared-prefix)")
    add_baseline_flag(parser)
    parser.add_argument("--length-scale", type=float, default=1.0,
                        help="multiply every prompt and output length, 0.1 for a quick check (default: %(default)s)")
    add_profile_flag(parser)
    add_sampling_arguments(parser)
    add_results_and_engine_settings(parser, "also write the results and settings to this file")
    parser.set_defaults(handler=_throughput)
