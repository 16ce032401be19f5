"""``autoglm`` command line: the parser that gathers every subcommand, and the entry point."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from autoglm import __version__
from autoglm.bench.cli import add_bench_subcommand
from autoglm.cli.generate import add_generate_subcommand
from autoglm.cli.keys import add_keys_subcommand
from autoglm.cli.logging import configure_logging
from autoglm.cli.models import add_models_subcommand
from autoglm.cli.perplexity import add_eval_ppl_subcommand
from autoglm.cli.quantize import add_quantize_subcommand
from autoglm.cli.serve import add_serve_subcommand
from autoglm.config import ConfigError

# Each entry adds one subcommand; modules with heavier imports load only when chosen.
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_generate_subcommand, add_serve_subcommand, add_eval_ppl_subcommand, add_bench_subcommand,
    add_quantize_subcommand, add_keys_subcommand, add_models_subcommand,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autoglm", description="Open-AutoGLM inference engine")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # Commands without the logging flags log at the default level.
    parser.set_defaults(log_level=None, quiet=False)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        configure_logging(args)
        return args.handler(args)
    except (ConfigError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
