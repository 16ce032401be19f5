"""``autoglm bench pp``: its options, and a run from a model to a summary and one results file.

The same greedy requests, all submitted at once, run through one engine process with every core and
through an engine of --stages pipeline stages (one process each, with its share of the cores) on the
same machine, in alternate rounds; each engine is quoted by its quickest round. On one machine the
stages share its cores and add a hand-over per stage and step: the pipeline is for models larger than
one device's memory, not for speed here.
"""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int


def _pipeline(args: argparse.Namespace) -> int:
    from autoglm.bench.pipeline.measure import run_pipeline_bench
    from autoglm.bench.pipeline.report import report_pipeline

    report_pipeline(args, run_pipeline_bench(args))
    return 0


def add_pipeline_command(subparsers) -> None:
    """Registers ``autoglm bench pp``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "pp", help="throughput of pipeline parallelism against one process on the same machine",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    load = parser.add_argument_group("load")
    load.add_argument("--stages", type=positive_int, default=2,
                      help="pipeline stages of the parallel engine (default: %(default)s)")
    load.add_argument("--num-prompts", type=positive_int, default=16, help="requests (default: %(default)s)")
    load.add_argument("--input-len", type=positive_int, default=64,
                      help="prompt tokens of every request (default: %(default)s)")
    load.add_argument("--output-len", type=positive_int, default=32,
                      help="tokens every request decodes (default: %(default)s)")
    load.add_argument("--rounds", type=positive_int, default=3,
                      help="measured rounds of each engine, alternating (default: %(default)s)")
    add_results_and_engine_settings(parser, "also write the settings and every figure to this file")
    parser.set_defaults(handler=_pipeline)
