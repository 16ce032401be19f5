"""``autoglm bench tenants``: its options, and a run from two servers to a summary and one results file.

It starts ``autoglm serve`` twice on the same model: without tenants, then with a tenants file
of its own (tenants A and B, a fresh key each, limits set but never reached). On each it measures
saturated throughput over the same prompts; on the second, A and B both backlogged (the token
split their weights should set), then B's few requests alone and beside A's flood.
"""
from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from autoglm.bench.lib.arguments import positive_float, positive_int
from autoglm.bench.lib.errors import run_http_bench


def _weights(text: str) -> tuple[float, float]:
    parts = text.split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected A's weight and B's as A:B, e.g. 3:1; got {text!r}")
    first, second = (positive_float(part) for part in parts)
    return first, second


def _tenants(args: argparse.Namespace) -> int:
    """Returns 1 when any request failed, so scripts notice."""
    from autoglm.bench.tenants.measure import run_tenants_bench
    from autoglm.bench.tenants.report import failed_requests, report_tenants

    return 1 if failed_requests(report_tenants(args, run_tenants_bench(args))) else 0


def add_tenants_command(subparsers) -> None:
    """Registers ``autoglm bench tenants``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "tenants", help="throughput with keys and limits against without, and fairness between two tenants",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    server = parser.add_argument_group("servers")
    server.add_argument("--model", help="checkpoint folder both servers load (default: the embedded model)")
    server.add_argument("--serve-args", default="", help="more `autoglm serve` flags for both servers, e.g. "
                        "'--dtype bfloat16'")
    server.add_argument("--max-num-seqs", type=positive_int, default=8,
                        help="sequences the servers run at once; small, so that backlogs wait (default: %(default)s)")
    server.add_argument("--port", type=positive_int, default=8012, help="port of the server without tenants; the one with tenants takes the next")
    server.add_argument("--timeout-s", type=positive_float, default=600.0, help="give up on one request after this")

    load = parser.add_argument_group("load")
    load.add_argument("--weights", type=_weights, default=(3.0, 1.0), metavar="A:B",
                      help="the tenants' scheduling weights (default: 3:1)")
    load.add_argument("--input-len", type=positive_int, default=128, help="prompt tokens of every request")
    load.add_argument("--output-len", type=positive_int, default=64, help="tokens every request asks for")
    load.add_argument("--overhead-prompts", type=positive_int, default=200,
                      help="requests sent at once in each throughput round")
    load.add_argument("--rounds", type=positive_int, default=3, help="throughput rounds on each server; the "
                      "median counts")
    load.add_argument("--backlog-prompts", type=positive_int, default=64,
                      help="requests each tenant sends at once in the fairness phase")
    load.add_argument("--flood-prompts", type=positive_int, default=64, help="requests of A's flood, sent at once")
    load.add_argument("--victim-prompts", type=positive_int, default=4, help="B's requests, alone and in the flood")
    load.add_argument("--victim-rate", type=positive_float, default=1.0, help="B's requests per second")
    load.add_argument("--victim-delay-s", type=positive_float, default=1.0,
                      help="seconds after A's flood that B's first request goes out (the same alone)")
    load.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-json", type=Path, help="write settings and every phase's figures here")
    parser.set_defaults(handler=partial(run_http_bench, "tenants", _tenants))
