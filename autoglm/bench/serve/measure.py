"""``autoglm bench serve``'s run: the prompts of each tenant at each rate sent to the server, and what it measured
shown as a table, written as JSON and drawn as charts."""
from __future__ import annotations

import argparse
import math
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.datasets import ServeRequest, jsonl_requests, random_requests, shared_prefix_requests
from autoglm.bench.lib.errors import ServeBenchError, import_extra
from autoglm.bench.lib.tenant_load import TenantLoad, tenant_loads
from autoglm.bench.results.report import write_json

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from autoglm.bench.lib.client import CompletionTarget
    from autoglm.bench.lib.rate_runner import Send

# Datasets that draw random prompts of exact token lengths, which takes a tokenizer.
TOKENIZER_DATASETS = ("random", "shared-prefix")
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = (
    "base_url", "dataset", "random_input_len", "random_output_len", "random_range_ratio", "shared_prefix_len",
    "shared_prefix_question_len", "shared_prefix_count", "num_prompts", "burstiness", "max_concurrency", "seed",
    "goodput", "ignore_eos", "timeout_s", "metrics_url",
)


def run_serve_bench(args: argparse.Namespace) -> int:
    """Every rate in turn; returns 1 when any request failed, so scripts notice."""
    if args.plot is not None:
        import_extra("matplotlib", "--plot")
    _check_dataset_options(args)
    loads = _loads(args)
    from autoglm.bench.lib.client import CompletionTarget
    from autoglm.bench.lib.rate_runner import rate_label, run_at_rate
    from autoglm.bench.lib.serve_metrics import aggregate
    from autoglm.bench.lib.tenant_metrics import tenant_results
    from autoglm.bench.serve.report import failure_notes, report_document, summary_table, tenants_table
    from autoglm.bench.serve.server_counters import prefix_cache_report, read_counters

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
