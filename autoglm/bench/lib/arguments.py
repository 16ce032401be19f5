"""Arguments the benchmark commands share: their types, and the options that end an engine benchmark's."""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.cli_settings import add_config_arguments

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
