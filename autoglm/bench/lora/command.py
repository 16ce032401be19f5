"""``autoglm bench lora``: its options, and a run from a model to a summary and one results file.

One engine per LoRA rank decodes rounds of the same batch of greedy requests, first for the base model alone,
then with the batch's rows spread over 1, 4 and 16 distinct random adapters (every projection of every layer
adapted), in turn, so that the machine's drift falls on every kind alike. It reports each kind's output tokens/s
in its quickest round, and the ratio to the base model alone: what serving adapters on the fly costs.
"""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int


def _lora(args: argparse.Namespace) -> int:
    from autoglm.bench.lora.measure import run_lora_bench
    from autoglm.bench.lora.report import report_lora

    report_lora(args, run_lora_bench(args))
    return 0


def add_lora_command(subparsers) -> None:
    """Registers ``autoglm bench lora``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "lora", help="what LoRA adapters in a batch cost against the base model alone",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    load = parser.add_argument_group("load")
    load.add_argument("--ranks", type=positive_int, nargs="+", default=[8, 16],
                      help="LoRA ranks, one engine each (default: %(default)s)")
    load.add_argument("--num-adapters", type=positive_int, nargs="+", default=[1, 4, 16],
                      help="distinct adapters the batch's rows are spread over, one kind of round each "
                           "(default: %(default)s)")
    load.add_argument("--batch-size", type=positive_int, default=16, help="requests of every round "
                      "(default: %(default)s)")
    load.add_argument("--input-len", type=positive_int, default=32, help="prompt tokens of every request "
                      "(default: %(default)s)")
    load.add_argument("--output-len", type=positive_int, default=32, help="tokens every request decodes "
                      "(default: %(default)s)")
    load.add_argument("--rounds", type=positive_int, default=3,
                      help="rounds of each kind, after one unmeasured (default: %(default)s)")
    add_results_and_engine_settings(parser, "also write the settings and every figure to this file")
    parser.set_defaults(handler=_lora)
