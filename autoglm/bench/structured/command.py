"""``autoglm bench structured``: its options, and a run from a model to a summary and one results file.

One engine runs rounds of B unconstrained greedy requests decoding side by side with K neighbours,
the neighbours unconstrained and constrained (a JSON schema and a regex, in turn) in alternate
rounds, so that the machine's drift falls on both kinds alike. It reports the unconstrained requests'
decode tokens/s beside each kind, the step time the constraints added, what filling and applying
the grammar mask cost a step timed alone, and what compiling each constraint costs.
"""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int


def _structured(args: argparse.Namespace) -> int:
    from autoglm.bench.structured.measure import run_structured_bench
    from autoglm.bench.structured.report import report_structured

    report_structured(args, run_structured_bench(args))
    return 0


def add_structured_command(subparsers) -> None:
    """Registers ``autoglm bench structured``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "structured", help="what constrained requests cost the unconstrained ones in the same batch",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    load = parser.add_argument_group("load")
    load.add_argument("--num-unconstrained", type=positive_int, default=12,
                      help="B: the unconstrained requests measured (default: %(default)s)")
    load.add_argument("--num-neighbours", type=positive_int, default=4,
                      help="K: neighbours, constrained or not by round (default: %(default)s)")
    load.add_argument("--input-len", type=positive_int, default=64, help="prompt tokens of every request "
                      "(default: %(default)s)")
    load.add_argument("--output-len", type=positive_int, default=32, help="tokens every request decodes "
                      "(default: %(default)s)")
    load.add_argument("--rounds", type=positive_int, default=3,
                      help="rounds of each kind, alternating after one unmeasured of each (default: %(default)s)")
    add_results_and_engine_settings(parser, "also write the settings and every figure to this file")
    parser.set_defaults(handler=_structured)
