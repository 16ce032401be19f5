"""``autoglm bench serve``: its options, and a run from settings to table, JSON and charts.

Registering the command loads only light modules; httpx, transformers and matplotlib load
when it runs, so ``autoglm --help`` stays quick.
"""
from __future__ import annotations

import argparse
import math
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoglm.bench.serve.arrivals import send_times
from autoglm.bench.serve.datasets import (
    DATASETS,
    ServeRequest,
    jsonl_requests,
    random_requests,
    shared_prefix_requests,
)
from autoglm.bench.arguments import number, positive_float, positive_int
from autoglm.bench.report import write_json
from autoglm.bench.serve.errors import ServeBenchError, import_extra, run_reporting_errors
from autoglm.bench.serve.metrics import SLO_NAMES

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
# Datasets that draw random prompts of exact token lengths, which takes a tokenizer.
TOKENIZER_DATASETS = ("random", "shared-prefix")
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = (
    "base_url", "dataset", "random_input_len", "random_output_len", "random_range_ratio", "shared_prefix_len",
    "shared_prefix_question_len", "num_prompts", "burstiness", "max_concurrency", "seed", "goodput", "ignore_eos",
    "timeout_s",
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
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    return run_reporting_errors(run_serve_bench, args)


def run_serve_bench(args: argparse.Namespace) -> int:
    """Every rate in turn; returns 1 when any request failed, so scripts notice."""
    import_extra("httpx")
    if args.plot is not None:
        import_extra("matplotlib")
    _check_dataset_options(args)
    from autoglm.bench.serve.client import CompletionTarget
    from autoglm.bench.serve.metrics import aggregate
    from autoglm.bench.serve.runner import run_at_rate
    from autoglm.bench.serve.summary import failure_notes, rate_label, report_document, summary_table

    model, tokenizer = _model_and_tokenizer(args)
    rates = [rate for group in args.request_rate or [[math.inf]] for rate in group]
    target = CompletionTarget(args.base_url, model, args.ignore_eos, args.timeout_s)
    print(f"Benchmarking {model} at {target.url} with {args.dataset} prompts", flush=True)
    runs = []
    for index, rate in enumerate(rates):
        # Fresh prompts for each rate: the prefix cache should not carry one rate's prompts into the next.
        requests = _build_requests(args, tokenizer, random.Random(f"{args.seed}:{index}"))
        print(f"rate {rate_label(rate)} req/s: sending {len(requests)} requests", flush=True)
        run = run_at_rate(target, requests, send_times(len(requests), rate, args.burstiness, args.seed), rate,
                          args.max_concurrency)
        runs.append((run, aggregate(run.results, run.duration_s, args.goodput)))
    print(summary_table(runs))
    notes = failure_notes([run for run, _ in runs])
    for note in notes:
        print(note)
    if args.output_json is not None:
        settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
        settings.update(model=model, tokenizer=None if tokenizer is None else tokenizer.name_or_path,
                        dataset_path=None if args.dataset_path is None else str(args.dataset_path),
                        request_rates=[rate_label(rate) for rate in rates])
        write_json(args.output_json, report_document(settings, runs))
    if args.plot is not None:
        from autoglm.bench.serve.plot import write_plots

        for path in write_plots(args.plot, runs):
            print(f"wrote {path}")
    return 1 if notes else 0


def _check_dataset_options(args: argparse.Namespace) -> None:
    if args.dataset == "jsonl" and args.dataset_path is None:
        raise ServeBenchError("--dataset jsonl needs --dataset-path")
    if args.dataset != "jsonl" and args.dataset_path is not None:
        raise ServeBenchError(f"--dataset-path is read only with --dataset jsonl, not {args.dataset}")


def _model_and_tokenizer(args: argparse.Namespace) -> tuple[str, PreTrainedTokenizerBase | None]:
    """The model to name in requests, and the tokenizer to draw and count prompts with, if any.

    /v1/models is asked when no ``--model`` is given, or when a dataset needs a tokenizer and
    none is given: a server on this machine (autoglm serve, vLLM) names its model folder as ``root``.
    """
    from autoglm.bench.serve.client import fetch_models

    model, tokenizer_path = args.model, args.tokenizer
    needs_tokenizer = args.dataset in TOKENIZER_DATASETS
    if model is None or (tokenizer_path is None and needs_tokenizer):
        cards = fetch_models(args.base_url)
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
                    rng: random.Random) -> list[ServeRequest]:
    if args.dataset == "jsonl":
        return jsonl_requests(args.dataset_path, args.num_prompts, args.random_output_len, tokenizer)
    assert tokenizer is not None, "random prompts are drawn with a tokenizer"
    if args.dataset == "shared-prefix":
        return shared_prefix_requests(tokenizer, args.num_prompts, args.shared_prefix_len,
                                      args.shared_prefix_question_len, args.random_output_len, rng)
    return random_requests(tokenizer, args.num_prompts, args.random_input_len, args.random_output_len,
                           args.random_range_ratio, rng)
