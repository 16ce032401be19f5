"""``autoglm bench speculative``: options, and a run from the quoting workload to a table and a results file."""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int
from autoglm.cli.settings import announced_config
from autoglm.model_paths import DEFAULT_DRAFT_MODEL_DIR


def add_speculative_command(subparsers) -> None:
    """Registers ``autoglm bench speculative``; listed in ``autoglm.bench.cli.BENCH_COMMANDS``."""
    parser = subparsers.add_parser(
        "speculative", help="acceptance and batch-1 decode speed of n-gram and draft-model speculation",
        description="The model is shown a passage of its own corpus, then its first tokens again, and continues. "
                    "Each request runs alone, greedy, without speculation and with each proposer.")
    parser.add_argument("--prompts", type=positive_int, default=8, help="passages (default: %(default)s)")
    parser.add_argument("--passage-tokens", type=positive_int, default=96,
                        help="tokens of each passage (default: %(default)s)")
    parser.add_argument("--cue-tokens", type=positive_int, default=16,
                        help="leading passage tokens repeated after it (default: %(default)s)")
    parser.add_argument("--output-len", type=positive_int, default=96,
                        help="tokens generated per request (default: %(default)s)")
    parser.add_argument("--num-speculative-tokens", type=positive_int, default=4,
                        help="proposed tokens per step, for both proposers (default: %(default)s)")
    parser.add_argument("--draft-model", type=Path, default=DEFAULT_DRAFT_MODEL_DIR,
                        help="draft checkpoint sharing the model's tokenizer (default: the default model's draft)")
    add_results_and_engine_settings(parser, "also write the results, for docs/PERFORMANCE.md")
    parser.set_defaults(handler=_speculative)


def _speculative(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from autoglm.bench.speculative.measure import measure_speculative
    from autoglm.bench.speculative.report import report_speculative, results_document
    from autoglm.bench.speculative.workload import quoting_prompts
    from autoglm.model_paths import resolve_model_path
    from autoglm.config.speculative import SpeculativeConfig

    config = announced_config(args)
    tokenizer = AutoTokenizer.from_pretrained(str(config.tokenizer or resolve_model_path(config.model)))
    prompts = quoting_prompts(tokenizer, args.prompts, args.passage_tokens, args.cue_tokens)
    k = args.num_speculative_tokens
    proposers = {
        "ngram": SpeculativeConfig(method="ngram", num_speculative_tokens=k),
        "draft_model": SpeculativeConfig(method="draft_model", num_speculative_tokens=k, model=str(args.draft_model)),
    }
    results = measure_speculative(config, prompts, args.output_len, proposers)
    settings = {"prompts": args.prompts, "passage_tokens": args.passage_tokens, "cue_tokens": args.cue_tokens,
                "output_len": args.output_len, "dtype": config.dtype,
                "proposers": {name: spec.model_dump(exclude={"model"}) for name, spec in proposers.items()},
                "draft_model": args.draft_model.name}
    report_speculative(results_document(results, settings), args.output_json)
    return 0
