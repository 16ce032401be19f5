"""Arguments the benchmark commands share: their types, and the options that end an engine benchmark's."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from autoglm.cli.settings import add_config_arguments

# Benchmarks measure the dtype real deployments serve in; a file, variable or flag may still choose another.
BENCH_SETTING_DEFAULTS = {"dtype": "bfloat16"}


def number(text: str, kind: type[int] | type[float]) -> float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    value = number(text, float)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    value = int(number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def add_results_and_engine_settings(parser: argparse.ArgumentParser, results_help: str) -> None:
    """``--output-json``, then the engine's settings at the benchmarks' defaults: the last options of every
    benchmark that runs the engine itself."""
    parser.add_argument("--output-json", type=Path, help=results_help)
    add_config_arguments(parser, defaults=BENCH_SETTING_DEFAULTS)


CHECKPOINT_DTYPES = ("bfloat16", "float16", "float32")
NO_BASELINE = "none"
BASELINES = ("transformers", NO_BASELINE)


def add_baseline_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", default="transformers", choices=BASELINES,
                        help="what the engine is compared with on the same requests; none runs it alone "
                             "(default: %(default)s)")


def chosen_baseline(args: argparse.Namespace) -> str | None:
    return None if args.baseline == NO_BASELINE else args.baseline


def add_num_threads_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-threads", type=int, help="torch CPU threads (default: torch's choice)")


def use_num_threads(args: argparse.Namespace) -> None:
    """A given ``--num-threads`` sets torch's; torch loads here, when the command runs."""
    import torch

    if args.num_threads is not None:
        torch.set_num_threads(args.num_threads)


def add_profile_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", action="store_true",
                        help="print where the engine's step time goes (slower: it times every phase)")


def add_quantized_model_command(subparsers, name: str, help_text: str, handler: Callable) -> None:
    """What quant-accuracy and quant-memory both take: a float model, the int4 group size, a results file."""
    parser = subparsers.add_parser(name, help=help_text)
    parser.add_argument("--model", help="float checkpoint folder (default: the embedded default model)")
    parser.add_argument("--group-size", type=int, help="int4 group size (default: 128)")
    parser.add_argument("--output-json", type=Path, help="also write the results, for docs/QUANTIZATION.md")
    parser.set_defaults(handler=handler)
