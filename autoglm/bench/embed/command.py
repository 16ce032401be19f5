"""``autoglm bench embed``: its options, and a run from a model to a summary and one results file.

The engine (its runner set to pooling) and transformers' base model embed the same batches of random token
ids, short and long inputs in turn, by last-token pooling, normalised; each is timed over several rounds after
one unmeasured, and the quickest round of each counts. It reports embeddings per second of both and the least
cosine between their embeddings of one input.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.bench.lib.arguments import BENCH_SETTING_DEFAULTS, add_baseline_flag, positive_int
from autoglm.cli.settings import add_config_arguments


def _embed(args: argparse.Namespace) -> int:
    from autoglm.bench.embed.measure import run_embed_bench
    from autoglm.bench.embed.report import report_embed

    report_embed(args, run_embed_bench(args))
    return 0


def add_embed_command(subparsers) -> None:
    """Registers ``autoglm bench embed``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser("embed", help="embeddings per second against transformers",
                                   description=__doc__.split("\n\n")[1].replace("\n", " "))
    load = parser.add_argument_group("load")
    load.add_argument("--batch-size", type=positive_int, default=32,
                      help="inputs embedded together (default: %(default)s)")
    load.add_argument("--short-len", type=positive_int, default=16,
                      help="tokens of every short input (default: %(default)s)")
    load.add_argument("--long-len", type=positive_int, default=512,
                      help="tokens of every long input (default: %(default)s)")
    load.add_argument("--rounds", type=positive_int, default=3,
                      help="measured rounds of each input length, after one unmeasured (default: %(default)s)")
    add_baseline_flag(parser)
    parser.add_argument("--output-json", type=Path, help="also write the settings and every figure to this file")
    add_config_arguments(parser, defaults={**BENCH_SETTING_DEFAULTS, "runner": "pooling"})
    parser.set_defaults(handler=_embed)
