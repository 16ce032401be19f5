"""``autoglm bench kv-accuracy``: its options, and the measurement from settings to table and JSON."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import get_args

from autoglm.bench.lib.arguments import positive_int
from autoglm.cli.settings import add_config_arguments, announced_config
from autoglm.config import AutoGLMConfig

KV_CACHE_DTYPES: tuple[str, ...] = get_args(AutoGLMConfig.model_fields["kv_cache_dtype"].annotation)
DEFAULT_POSITIONS = 2000


def _kv_cache_dtypes(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in KV_CACHE_DTYPES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"expected kv_cache_dtype names separated by commas, from {', '.join(KV_CACHE_DTYPES)}; got {text!r}")
    return names


def _kv_accuracy(args: argparse.Namespace) -> int:
    from autoglm.attention.kv_cache_format import check_kv_cache_format, kv_cache_format
    from autoglm.bench.kv_accuracy.measure import measure_kv_accuracy, results_document
    from autoglm.bench.kv_accuracy.report import SUMMARY_HEADER, summary_rows
    from autoglm.bench.results.report import format_table, machine_info, print_and_write
    from autoglm.corpus import read_corpus
    from autoglm.platforms import resolve_device

    config = announced_config(args)
    device = resolve_device(config.device)
    names = []
    for name in args.kv_cache_dtypes:
        try:
            check_kv_cache_format(kv_cache_format(name), device)
            names.append(name)
        except ValueError as error:
            print(f"skipped: {error}")
    text = read_corpus().held_out
    results = measure_kv_accuracy(config, names, text, args.positions)
    document = results_document(config, results, args.positions, len(text), machine_info())
    print_and_write([format_table(SUMMARY_HEADER, summary_rows(document), text_columns=2)], document,
                    args.output_json)
    return 0


def add_kv_accuracy_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "kv-accuracy", help="perplexity and next-token agreement of each kv_cache_dtype on held-out text",
        description="Score the held-out part of the default model's corpus with each KV cache dtype: loss per "
                    "character over the whole text, and top-1 agreement and mean KL divergence of the next-token "
                    "distributions against the 'auto' cache over evenly spread positions. With --quantization "
                    "int8|int4 each cache runs with those weights, compared with float weights and the 'auto' cache.",
    )
    parser.add_argument("--kv-cache-dtypes", type=_kv_cache_dtypes, default=list(KV_CACHE_DTYPES),
                        help=f"comma-separated, compared with auto (default: {','.join(KV_CACHE_DTYPES)}); one the "
                             "device cannot convert to is skipped with its reason")
    parser.add_argument("--positions", type=positive_int, default=DEFAULT_POSITIONS,
                        help="next-token distributions compared (default: %(default)s)")
    parser.add_argument("--output-json", type=Path, help="also write the results and settings to this file")
    add_config_arguments(parser)
    parser.set_defaults(handler=_kv_accuracy)
