"""``autoglm bench ...``: the benchmark subcommands, also runnable as ``main(argv)``.

Each entry of :data:`BENCH_COMMANDS` adds one subcommand, the way ``autoglm.cli`` does.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoglm.bench.shapes import MODEL_SHAPES
from autoglm.bench.workloads import WORKLOADS

ALL_WORKLOADS = "all"
CHECKPOINT_DTYPES = ("bfloat16", "float16", "float32")
NO_BASELINE = "none"
BASELINES = ("transformers", NO_BASELINE)


def _config_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a JSON value, e.g. ``hidden_size=64`` or ``tie_word_embeddings=false``."""
    key, separator, raw_value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw_value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"the value of {key} must be JSON (a number, true, a list...), got {raw_value!r}"
        ) from None


# Handlers import their modules when run: `autoglm --help` should not load torch.
def _make_model(args: argparse.Namespace) -> int:
    from autoglm.bench.make_model import make_model

    overrides = dict(args.override)
    if args.layers is not None:
        overrides["num_hidden_layers"] = args.layers
    folder = make_model(args.shape, args.out, dtype=args.dtype, seed=args.seed, overrides=overrides)
    print(f"wrote a random-weight {args.shape} checkpoint ({args.dtype}, seed {args.seed}) to {folder}")
    return 0


def _add_make_model(subparsers) -> None:
    parser = subparsers.add_parser("make-model", help="write a random-weight checkpoint of a real model's shape")
    parser.add_argument("--shape", required=True, choices=list(MODEL_SHAPES))
    parser.add_argument("--out", required=True, help="folder to write the checkpoint into")
    parser.add_argument("--layers", type=int, help="number of decoder layers instead of the real model's")
    parser.add_argument("--dtype", default="bfloat16", choices=CHECKPOINT_DTYPES)
    parser.add_argument("--seed", type=int, default=0, help="the same seed writes the same weights")
    parser.add_argument("--override", type=_config_override, action="append", default=[], metavar="KEY=VALUE",
                        help="replace one config.json value (JSON), e.g. hidden_size=64; repeatable")
    parser.set_defaults(handler=_make_model)


def _throughput(args: argparse.Namespace) -> int:
    from autoglm.bench.throughput import ThroughputSettings, report_throughput, run_throughput
    from autoglm.cli import announce_model, config_from_args

    config = config_from_args(args)
    announce_model(config)
    settings = ThroughputSettings(
        config=config,
        workloads=list(WORKLOADS) if args.workload == ALL_WORKLOADS else [args.workload],
        num_prompts=args.num_prompts,
        baseline=None if args.baseline == NO_BASELINE else args.baseline,
        length_scale=args.length_scale,
    )
    report_throughput(settings, run_throughput(settings), args.output_json)
    return 0


def _add_throughput(subparsers) -> None:
    # autoglm.cli imports this module to register `bench`, so its helpers are imported when used.
    from autoglm.cli import add_config_arguments

    parser = subparsers.add_parser("throughput", help="tokens per second of the engine against transformers")
    parser.add_argument("--workload", default=ALL_WORKLOADS, choices=[*WORKLOADS, ALL_WORKLOADS])
    parser.add_argument("--num-prompts", type=int, default=64, help="requests per workload")
    parser.add_argument("--baseline", default="transformers", choices=BASELINES)
    parser.add_argument("--length-scale", type=float, default=1.0,
                        help="multiply every prompt and output length, e.g. 0.1 for a quick check")
    parser.add_argument("--output-json", type=Path, help="also write the results and settings to this file")
    add_config_arguments(parser)
    parser.set_defaults(handler=_throughput, dtype="bfloat16")


BENCH_COMMANDS: list[Callable] = [_add_make_model, _add_throughput]


def add_bench_commands(subparsers) -> None:
    for add in BENCH_COMMANDS:
        add(subparsers)


def add_bench_subcommand(subparsers) -> None:
    """Registers ``autoglm bench``; listed in ``autoglm.cli.SUBCOMMANDS``."""
    parser = subparsers.add_parser("bench", help="benchmark the engine")
    add_bench_commands(parser.add_subparsers(dest="bench_command", required=True))


def main(argv: list[str] | None = None) -> int:
    """``autoglm bench`` on its own, for scripts and tests."""
    parser = argparse.ArgumentParser(prog="autoglm bench", description="Open-AutoGLM benchmarks")
    add_bench_commands(parser.add_subparsers(dest="bench_command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)
