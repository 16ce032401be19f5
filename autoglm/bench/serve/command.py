"""``autoglm bench serve``: its options, and a run from settings to table, JSON and charts.

Registering the command loads only light modules; httpx, transformers and matplotlib load
when it runs, so ``autoglm --help`` stays quick.
"""
from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from autoglm.bench.lib.arguments import number, positive_float, positive_int
from autoglm.bench.lib.datasets import DATASETS
from autoglm.bench.lib.errors import run_http_bench
from autoglm.bench.lib.serve_metrics import SLO_NAMES
from autoglm.bench.lib.tenant_load import tenant_keys, tenant_prompts, tenant_rates, tenant_weights

DEFAULT_BASE_URL = "http://127.0.0.1:8000"


def _range_ratio(text: str) -> float:
    value = number(text, float)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {text}")
    return value


def _rates(text: str) -> list[float]:
    """One ``--request-rate``: a rate in requests per second, ``inf``, or a comma list of them."""
    try:
        return [positive_float(item) for item in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected positive requests per second or inf, or a comma list of them; got {text!r}") from None


def _slos(text: str) -> dict[str, float]:
    """``--goodput ttft:MS,tpot:MS,e2el:MS``, any subset."""
    slos = {}
    for item in text.split(","):
        name, separator, bound = item.partition(":")
        if not separator or name not in SLO_NAMES:
            raise argparse.ArgumentTypeError(f"expected NAME:MS with NAME one of {', '.join(SLO_NAMES)}; got {item!r}")
        slos[name] = positive_float(bound)
    return slos


def _serve(args: argparse.Namespace) -> int:
    from autoglm.bench.serve.measure import run_serve_bench

    return run_serve_bench(args)


def add_serve_command(subparsers) -> None:
    """Registers ``autoglm bench serve``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "serve", help="load an OpenAI-compatible server and measure its latency and throughput",
        description="Send streamed /v1/completions requests at chosen rates to a running server "
                    "(autoglm serve, vLLM, ...) and report throughput and TTFT/TPOT/ITL/E2E latency.",
    )
    server = parser.add_argument_group("server")
    server.add_argument("--base-url", default=DEFAULT_BASE_URL,
                        help=f"the server's address (default {DEFAULT_BASE_URL})")
    server.add_argument("--model", help="model name sent in each request (default: the first of GET /v1/models)")
    server.add_argument("--tokenizer", help="Hugging Face tokenizer folder (or hub name) of the served model, to draw "
                        "prompts of exact token lengths and count them; the random and shared-prefix datasets need "
                        "one, and default to the model folder /v1/models names when it exists on this machine")
    server.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True,
                        help="ask for exactly max_tokens tokens (vLLM's ignore_eos); --no-ignore-eos for servers "
                        "that reject the field")
    server.add_argument("--timeout-s", type=positive_float,
                        help="give up on a request after this many seconds (default: never)")
    server.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY' with every request (and the "
                        "/v1/models look-up), for a server with tenants or --api-key")
    server.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                        help="a Prometheus endpoint whose prefix-cache counters are read before and after each rate "
                        "(the server's /metrics, or each replica's behind a router); repeatable: the run's hit rate "
                        "sums them all")

    tenancy = parser.add_argument_group(
        "tenants", "Several tenants at once, each with its own key, rate and number of requests; results per "
        "tenant, and each one's share of the tokens served while every tenant had requests waiting")
    tenancy.add_argument("--tenants", type=tenant_weights, metavar="NAME[:WEIGHT][,...]",
                         help="the tenants and the weights their server's tenants file gives them (default 1), "
                         "e.g. A:3,B:1; the weights set the token shares the results compare with")
    tenancy.add_argument("--tenant-rates", type=tenant_rates, default={}, metavar="NAME:RATE[,...]",
                         help="requests per second of each named tenant, or inf (default: --request-rate)")
    tenancy.add_argument("--tenant-prompts", type=tenant_prompts, default={}, metavar="NAME:COUNT[,...]",
                         help="requests each named tenant sends (default: --num-prompts)")
    tenancy.add_argument("--tenant-keys", type=tenant_keys, default={}, metavar="NAME=KEY[,...]|FILE",
                         help="each tenant's API key, or a file of NAME=KEY lines (default: --api-key)")

    data = parser.add_argument_group("prompts")
    data.add_argument("--dataset", default="random", choices=DATASETS)
    data.add_argument("--dataset-path", type=Path, help='JSONL file for --dataset jsonl: one {"prompt": "...", '
                      '"output_len": N} per line, output_len optional (default --random-output-len)')
    data.add_argument("--num-prompts", type=positive_int, default=200, help="requests per request rate")
    data.add_argument("--random-input-len", type=positive_int, default=512, help="prompt tokens (random dataset)")
    data.add_argument("--random-output-len", type=positive_int, default=128, help="tokens to generate per request")
    data.add_argument("--random-range-ratio", type=_range_ratio, default=0.0,
                      help="draw random lengths uniformly within this fraction of the given ones, 0 <= r < 1")
    data.add_argument("--shared-prefix-len", type=positive_int, default=1024,
                      help="tokens of the prefix every prompt shares (shared-prefix dataset)")
    data.add_argument("--shared-prefix-question-len", type=positive_int, default=64,
                      help="tokens of each prompt after the shared prefix")
    data.add_argument("--shared-prefix-count", type=positive_int, default=1,
                      help="distinct shared prefixes (documents), taken by the prompts in turn")
    data.add_argument("--seed", type=int, default=0, help="fixes the prompts and the send times")

    load = parser.add_argument_group("load")
    load.add_argument("--request-rate", type=_rates, action="append", metavar="RATE[,RATE...]",
                      help="requests per second, drawn as a Poisson process; inf sends all at once (default). "
                      "Repeat it or give a comma list to sweep several rates in one run")
    load.add_argument("--burstiness", type=positive_float, default=1.0,
                      help="shape of the gamma-distributed gaps: 1 is Poisson, below 1 burstier, above 1 steadier")
    load.add_argument("--max-concurrency", type=positive_int,
                      help="most requests in flight at once (default: no limit)")
    load.add_argument("--goodput", type=_slos, metavar="ttft:MS,tpot:MS,e2el:MS",
                      help="count the requests meeting all these latency bounds and report them per second")

    output = parser.add_argument_group("output")
    output.add_argument("--output-json", type=Path, help="write settings, aggregates and every request's timings here")
    output.add_argument("--plot", metavar="DIR_OR_PREFIX",
                        help="write PNG charts into this folder (trailing slash or existing) or with this file prefix")
    parser.set_defaults(handler=partial(run_http_bench, "serve", _serve))
