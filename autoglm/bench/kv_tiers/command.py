"""``autoglm bench kv-tiers``: options, and a run from the shared-prefix workload to a table and a results file."""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int


def add_kv_tiers_command(subparsers) -> None:
    """Registers ``autoglm bench kv-tiers``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "kv-tiers", help="time to first token of a long shared prefix restored from host memory and from disk",
        description="A prefix and a fresh question, one token asked, run alone: recomputed, still in the pool, "
                    "restored from the host memory tier and from the disk tier after other prompts evicted it, and "
                    "read from disk by a restarted engine. The model needs a context of the prefix and the question: "
                    "the embedded model's 256 tokens are too few for the default prefix; make one with "
                    "`autoglm bench make-model` and pass it with --model.")
    parser.add_argument("--prefix-len", type=positive_int, default=2000,
                        help="tokens of the shared prefix (default: %(default)s)")
    parser.add_argument("--question-len", type=positive_int, default=16,
                        help="tokens after the prefix in each turn (default: %(default)s)")
    parser.add_argument("--trials", type=positive_int, default=3,
                        help="timed turns of each kind; the median counts (default: %(default)s)")
    add_results_and_engine_settings(parser, "also write the results, for docs/PERFORMANCE.md")
    parser.set_defaults(handler=_kv_tiers)


def _kv_tiers(args: argparse.Namespace) -> int:
    import random

    from autoglm.bench.kv_tiers.measure import Workload, measure_kv_tiers
    from autoglm.bench.kv_tiers.report import report_kv_tiers, results_document
    from autoglm.cli.settings import announced_config
    from autoglm.model_paths import resolve_model_path
    from autoglm.models import ModelConfig

    config = announced_config(args)
    model_config = ModelConfig.from_pretrained(resolve_model_path(config.model))
    needed = args.prefix_len + args.question_len + 1
    if model_config.max_position_embeddings and model_config.max_position_embeddings < needed:
        raise SystemExit(f"the model holds {model_config.max_position_embeddings} positions; a turn of "
                         f"--prefix-len {args.prefix_len} and --question-len {args.question_len} needs {needed}: "
                         "give a shorter prefix or a model made with `autoglm bench make-model`")
    vocab = range(3, model_config.vocab_size)
    rng = random.Random(f"{config.seed}-prefix")  # the engine's --seed draws the prompts too
    workload = Workload([rng.choice(vocab) for _ in range(args.prefix_len)], args.question_len, vocab, config.seed)
    results = measure_kv_tiers(config, workload, args.trials)
    settings = {"model": model_config.architecture, "hidden_size": model_config.hidden_size,
                "num_hidden_layers": model_config.num_hidden_layers, "dtype": config.dtype,
                "kv_cache_dtype": config.kv_cache_dtype, "block_size": config.block_size,
                "prefix_len": args.prefix_len, "question_len": args.question_len, "trials": args.trials}
    report_kv_tiers(results_document(results, settings), args.output_json)
    return 0
