"""``autoglm bench batch``: its options, and a run from one server to a summary and one results file.

It starts ``autoglm serve`` on the model (its data directory a fresh one), sends half the
interactive streamed chat requests one at a time and times their first token, then uploads a
JSONL file of chat lines, makes a batch of it and, while the batch runs, sends as many
interactive requests again; once the batch has ended, the other half alone. It reports their
TTFT beside the batch over alone, and the batch's lines per second.
"""
from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from autoglm.bench.lib.arguments import positive_float, positive_int
from autoglm.bench.lib.errors import run_http_bench


def _batch(args: argparse.Namespace) -> int:
    """Returns 1 when a request or a line failed, so scripts notice; a ratio beyond the target is a finding."""
    from autoglm.bench.batch.measure import run_batch_bench
    from autoglm.bench.batch.report import failures, report_batch

    return 1 if failures(report_batch(args, run_batch_bench(args))) else 0


def add_batch_command(subparsers) -> None:
    """Registers ``autoglm bench batch``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "batch", help="interactive requests' time to first token while a batch runs, against alone",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    server = parser.add_argument_group("server")
    server.add_argument("--model", help="checkpoint folder the server loads (default: the embedded model)")
    server.add_argument("--serve-args", default="", help="more `autoglm serve` flags, e.g. "
                        "'--batch-max-lines-in-flight 8'")
    server.add_argument("--port", type=positive_int, default=8014, help="port of the server")
    server.add_argument("--timeout-s", type=positive_float, default=600.0, help="give up on one request after this")
    server.add_argument("--batch-timeout-s", type=positive_float, default=3600.0,
                        help="give up on the batch this long after making it")

    load = parser.add_argument_group("load")
    load.add_argument("--batch-lines", type=positive_int, default=200, help="chat lines of the batch")
    load.add_argument("--interactive-requests", type=positive_int, default=20,
                      help="interactive requests alone (half before the batch, half after), and as many beside it")
    load.add_argument("--input-len", type=positive_int, default=128, help="prompt tokens of every request and line")
    load.add_argument("--output-len", type=positive_int, default=64, help="tokens every request and line asks for")
    load.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-json", type=Path, help="write settings and every phase's figures here")
    parser.set_defaults(handler=partial(run_http_bench, "batch", _batch))
