"""``autoglm bench swap``: its options, and a run from a checkpoint to a summary and one results file.

It registers --model as version 1 of a model in a registry of its own and --model-b (by default a
copy of --model with slightly different weights) as version 2, starts ``autoglm serve`` with version 1
stable and version 2 loaded as warm standby, keeps --streams streaming requests in flight, and each
round promotes version 2 and then rolls back to version 1 (reloading version 2 before the next round),
each switch once every stream has moved to the stable version and streamed --settle-s more.
It measures each admin call, the time until the version switched to serves a first token, and whether
any request failed, changed version midway or was served by a version other than the stable it was
sent under.
"""
from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from autoglm.bench.lib.arguments import positive_float, positive_int
from autoglm.bench.lib.errors import run_http_bench


def _swap(args: argparse.Namespace) -> int:
    """Returns 1 when a request failed, changed version or was misrouted, so scripts notice."""
    from autoglm.bench.swap.measure import run_swap_bench
    from autoglm.bench.swap.report import problems, report_swap

    return 1 if problems(report_swap(args, run_swap_bench(args))) else 0


def add_swap_command(subparsers) -> None:
    """Registers ``autoglm bench swap``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "swap", help="promote and rollback under streaming load: time until the new version serves, and no "
        "request dropped", description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    server = parser.add_argument_group("versions and server")
    server.add_argument("--model", type=Path, required=True, help="checkpoint folder of version 1")
    server.add_argument("--model-b", type=Path, help="checkpoint folder of version 2 (default: a copy of --model "
                        "with each weight scaled by 1%% noise)")
    server.add_argument("--serve-args", default="", help="more `autoglm serve` flags, e.g. '--kv-cache-memory 1GiB'")
    server.add_argument("--port", type=positive_int, default=8014, help="port of the server it starts")
    server.add_argument("--timeout-s", type=positive_float, default=300.0,
                        help="give up on one request, or on version 2's unloading, after this")

    load = parser.add_argument_group("load")
    load.add_argument("--streams", type=positive_int, default=32, help="streaming requests kept in flight")
    load.add_argument("--output-len", type=positive_int, default=32, help="tokens each request asks for")
    load.add_argument("--rounds", type=positive_int, default=3, help="promote-then-rollback rounds")
    load.add_argument("--settle-s", type=positive_float, default=2.0,
                      help="seconds of streaming before each switch, once every stream is on the stable "
                      "version, and after the last")
    load.add_argument("--seed", type=int, default=0, help="the noise of version 2's weights")
    parser.add_argument("--output-json", type=Path, help="write settings, every switch and the request counts here")
    parser.set_defaults(handler=partial(run_http_bench, "swap", _swap))
