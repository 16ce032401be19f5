"""``autoglm bench serve``: its options, and a run from settings to table, JSON and charts.

Registering the command loads only light modules; httpx, transformers and matplotlib load
when it runs, so ``autoglm --help`` stays quick.
"""
from __future__ import annotations

import argparse
import math
import random
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.datasets import (
    DATASETS,
    ServeRequest,
    jsonl_requests,
    random_requests,
    shared_prefix_requests,
)
from autoglm.bench.lib.arguments import number, positive_float, positive_int
from autoglm.bench.results.report import write_json
from autoglm.bench.lib.errors import ServeBenchError, import_extra, run_http_bench
from autoglm.bench.lib.serve_metrics import SLO_NAMES
from autoglm.bench.lib.tenant_load import (
    TenantLoad,
    tenant_keys,
    tenant_loads,
    tenant_prompts,
    tenant_rates,
    tenant_weights,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from autoglm.bench.lib.client import CompletionTarget
    from autoglm.bench.lib.rate_runner import Send

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
# Datasets that draw random prompts of exact token lengths, which takes a tokenizer.
TOKENIZER_DATASETS = ("random", "shared-prefix")
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = (
    "base_url", "dataset", "random_input_len", "random_output_len", "random_range_ratio", "shared_prefix_len",
    "shared_prefix_question_len", "shared_prefix_count", "num_prompts", "burstiness", "max_concurrency", "seed",
    "goodput", "ignore_eos", "timeout_s", "metrics_url",
)


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
    parser.set_defaults(handler=partial(run_http_bench, "serve", run_serve_bench))


def run_serve_bench(args: argparse.Namespace) -> int:
    """Every rate in turn; returns 1 when any request failed, so scripts notice."""
    if args.plot is not None:
        import_extra("matplotlib", "--plot")
    _check_dataset_options(args)
    loads = _loads(args)
    from autoglm.bench.lib.client import CompletionTarget
    from autoglm.bench.lib.serve_metrics import aggregate
    from autoglm.bench.lib.rate_runner import run_at_rate
    from autoglm.bench.serve.server_counters import prefix_cache_report, read_counters
    from autoglm.bench.serve.report import failure_notes, rate_label, report_document, summary_table, tenants_table
    from autoglm.bench.lib.tenant_metrics import tenant_results

    model, tokenizer = _model_and_tokenizer(args, loads[0].api_key)
    rates = [rate for group in args.request_rate or [[math.inf]] for rate in group]
    targets = [CompletionTarget(args.base_url, model, args.ignore_eos, args.timeout_s, load.api_key,
                                load.name if args.tenants else None) for load in loads]
    print(f"Benchmarking {model} at {targets[0].url} with {args.dataset} prompts", flush=True)
    runs, tenants_by_run, prefix_caches = [], [], []
    for index, rate in enumerate(rates):
        sends, tenant_rates = _sends(args, tokenizer, loads, targets, rate, index)
        print(f"rate {rate_label(rate)} req/s: sending {len(sends)} requests", flush=True)
        before = [read_counters(url) for url in args.metrics_url]
        run = run_at_rate(sends, rate, args.max_concurrency)
        runs.append((run, aggregate(run.results, run.duration_s, args.goodput)))
        if args.metrics_url:
            prefix_caches.append(prefix_cache_report(args.metrics_url, before,
                                                     [read_counters(url) for url in args.metrics_url]))
            print(f"prefix cache hit rate: {_percent(prefix_caches[-1]['hit_rate'])}", flush=True)
        if args.tenants:
            tenants_by_run.append(tenant_results(loads, tenant_rates, run.results, run.duration_s, args.goodput))
    print(summary_table(runs))
    for (run, _), tenants in zip(runs, tenants_by_run):
        print(f"\nrate {rate_label(run.request_rate)} req/s, per tenant:")
        print(tenants_table(*tenants))
    notes = failure_notes([run for run, _ in runs])
    for note in notes:
        print(note)
    if args.output_json is not None:
        settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
        settings.update(model=model, tokenizer=None if tokenizer is None else tokenizer.name_or_path,
                        dataset_path=None if args.dataset_path is None else str(args.dataset_path),
                        request_rates=[rate_label(rate) for rate in rates], api_key=args.api_key is not None,
                        tenants=None if not args.tenants else [
                            {"name": load.name, "weight": load.weight, "num_prompts": load.num_prompts,
                             "request_rate": None if load.request_rate is None else rate_label(load.request_rate)}
                            for load in loads])
        write_json(args.output_json, report_document(settings, runs, tenants_by_run or None, prefix_caches or None))
    if args.plot is not None:
        from autoglm.bench.serve.plot import write_plots

        for path in write_plots(args.plot, runs):
            print(f"wrote {path}")
    return 1 if notes else 0


def _percent(fraction: float | None) -> str:
    return "n/a (no prompt tokens looked up)" if fraction is None else f"{fraction:.1%}"


def _loads(args: argparse.Namespace) -> list[TenantLoad]:
    """The tenants of ``--tenants``; without it, one anonymous sender with ``--api-key``."""
    if args.tenants is None:
        given = [option for option, value in (("--tenant-rates", args.tenant_rates),
                                              ("--tenant-prompts", args.tenant_prompts),
                                              ("--tenant-keys", args.tenant_keys)) if value]
        if given:
            raise ServeBenchError(f"{', '.join(given)} set what each tenant of --tenants sends; name the tenants "
                                  "with --tenants NAME[:WEIGHT],...")
        return [TenantLoad("", 1.0, args.api_key, None, args.num_prompts)]
    return tenant_loads(args.tenants, args.tenant_rates, args.tenant_prompts, args.tenant_keys, args.num_prompts,
                        args.api_key)


def _sends(args: argparse.Namespace, tokenizer: PreTrainedTokenizerBase | None, loads: list[TenantLoad],
           targets: list[CompletionTarget], rate: float, index: int) -> tuple[list[Send], dict[str, float]]:
    """Every request of one run, each tenant's at its own rate, and those rates by tenant."""
    from autoglm.bench.lib.rate_runner import tenant_sends

    def requests_of(load: TenantLoad) -> list[ServeRequest]:
        # Fresh prompts for each rate and tenant: the prefix cache should carry none from one to another.
        seed = f"{args.seed}:{index}" + (f":{load.name}" if load.name else "")
        return _build_requests(args, tokenizer, random.Random(seed), load.num_prompts)

    return tenant_sends(loads, targets, requests_of, rate, args.burstiness, args.seed)


def _check_dataset_options(args: argparse.Namespace) -> None:
    if args.dataset == "jsonl" and args.dataset_path is None:
        raise ServeBenchError("--dataset jsonl needs --dataset-path")
    if args.dataset != "jsonl" and args.dataset_path is not None:
        raise ServeBenchError(f"--dataset-path is read only with --dataset jsonl, not {args.dataset}")


def _model_and_tokenizer(args: argparse.Namespace,
                         api_key: str | None) -> tuple[str, PreTrainedTokenizerBase | None]:
    """The model to name in requests, and the tokenizer to draw and count prompts with, if any.

    /v1/models is asked when no ``--model`` is given, or when a dataset needs a tokenizer and
    none is given: a server on this machine (autoglm serve, vLLM) names its model folder as ``root``.
    """
    from autoglm.bench.lib.client import fetch_models

    model, tokenizer_path = args.model, args.tokenizer
    needs_tokenizer = args.dataset in TOKENIZER_DATASETS
    if model is None or (tokenizer_path is None and needs_tokenizer):
        cards = fetch_models(args.base_url, api_key)
        card = cards[0] if model is None else next((card for card in cards if card.get("id") == model), None)
        model = model or cards[0]["id"]
        if tokenizer_path is None and needs_tokenizer:
            tokenizer_path = _served_model_folder(card, args.dataset)
    if tokenizer_path is None:
        return model, None
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    except (OSError, ValueError) as error:
        raise ServeBenchError(f"could not load a tokenizer from {tokenizer_path}: {error}") from None
    print(f"Drawing and counting prompt tokens with the tokenizer of {tokenizer_path}", flush=True)
    return model, tokenizer


def _served_model_folder(card: dict[str, Any] | None, dataset: str) -> str:
    root = None if card is None else card.get("root")
    if isinstance(root, str) and Path(root).is_dir():
        return root
    raise ServeBenchError(
        f"the {dataset} dataset needs --tokenizer (the served model's tokenizer folder or hub name) to draw "
        "prompts of exact token lengths; the server names no model folder that exists on this machine"
    )


def _build_requests(args: argparse.Namespace, tokenizer: PreTrainedTokenizerBase | None,
                    rng: random.Random, num_prompts: int) -> list[ServeRequest]:
    if args.dataset == "jsonl":
        return jsonl_requests(args.dataset_path, num_prompts, args.random_output_len, tokenizer)
    assert tokenizer is not None, "random prompts are drawn with a tokenizer"
    if args.dataset == "shared-prefix":
        return shared_prefix_requests(tokenizer, num_prompts, args.shared_prefix_len,
                                      args.shared_prefix_question_len, args.random_output_len, rng,
                                      args.shared_prefix_count)
    return random_requests(tokenizer, num_prompts, args.random_input_len, args.random_output_len,
                           args.random_range_ratio, rng)
