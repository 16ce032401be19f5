"""``autoglm bench tenants``: its options, and a run from two servers to a summary and one results file.

It starts ``autoglm serve`` twice on the same model: without tenants, then with a tenants file
of its own (tenants A and B, a fresh key each, limits set but never reached). On each it measures
saturated throughput over the same prompts; on the second, A and B both backlogged (the token
split their weights should set), then B's few requests alone and beside A's flood.
"""
from __future__ import annotations

import argparse
import shlex
import tempfile
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
    parser.set_defaults(handler=partial(run_http_bench, "tenants", run_tenants_bench))


def run_tenants_bench(args: argparse.Namespace) -> int:
    """Returns 1 when any request failed, so scripts notice."""
    from autoglm.bench.lib.server import start_server
    from autoglm.bench.lib.tenant_load import TenantLoad
    from autoglm.bench.results.report import machine_info, print_and_write
    from autoglm.bench.tenants.measure import phase_settings, run_phase, throughput_rounds
    from autoglm.bench.tenants.report import failed_requests, summary_lines
    from autoglm.bench.tenants.tenants_file import FLOODER, VICTIM, write_bench_tenants

    folder = Path(tempfile.mkdtemp(prefix="autoglm-bench-tenants-"))
    serve_args = f"{args.serve_args} --max-num-seqs {args.max_num_seqs}"
    tenants = write_bench_tenants(folder / "tenants.yaml", dict(zip((FLOODER, VICTIM), args.weights)))
    keyed_args = (f"{serve_args} --tenants-file {shlex.quote(str(tenants.path))} "
                  f"--usage-db {shlex.quote(str(folder / 'usage.sqlite'))}")
    # Both servers up at once, the throughput rounds alternating between them, so that the
    # machine's drift over the run falls on both alike; the one not measured sits idle.
    open_server = start_server(args.port, args.model, serve_args, folder / "server-open.log")
    try:
        server = start_server(args.port + 1, args.model, keyed_args, folder / "server-tenants.log")
    except BaseException:
        open_server.stop()
        raise
    try:
        settings = phase_settings(server.base_url, tenants.keys[FLOODER], args)
        open_rounds, keyed_rounds = throughput_rounds(
            phase_settings(open_server.base_url, None, args), settings, tenants.keys[FLOODER], args)
        open_server.stop()

        def load(name: str, prompts: int, rate: float | None = None, start_s: float = 0.0) -> TenantLoad:
            return TenantLoad(name, tenants.weights[name], tenants.keys[name], rate, prompts, start_s)

        print(f"fairness: {FLOODER} and {VICTIM} send {args.backlog_prompts} requests each at once", flush=True)
        fairness = run_phase(settings, "fairness", [load(FLOODER, args.backlog_prompts),
                                                   load(VICTIM, args.backlog_prompts)])
        victim = load(VICTIM, args.victim_prompts, args.victim_rate, args.victim_delay_s)
        print(f"flood: {VICTIM}'s {args.victim_prompts} requests alone, then beside {args.flood_prompts} of "
              f"{FLOODER}'s", flush=True)
        alone = run_phase(settings, "alone", [victim])
        flooded = run_phase(settings, "flooded", [load(FLOODER, args.flood_prompts), victim])
    finally:
        open_server.stop()
        server.stop()

    recorded = {name: getattr(args, name) for name in (
        "serve_args", "max_num_seqs", "input_len", "output_len", "overhead_prompts", "rounds", "backlog_prompts",
        "flood_prompts", "victim_prompts", "victim_rate", "victim_delay_s", "seed")}
    recorded.update(model=settings.model, server_model_folder=args.model, weights=tenants.weights)
    document = {"settings": recorded, "machine": machine_info(),
                "overhead": {"open": open_rounds, "keyed": keyed_rounds}, "fairness": fairness,
                "flood": {"alone": alone, "flooded": flooded}}
    print_and_write(summary_lines(document), document, args.output_json)
    return 1 if failed_requests(document) else 0
