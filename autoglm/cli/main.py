"""``autoglm`` command line: generate, and the subcommands other modules register."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from autoglm import __version__
from autoglm.bench.cli import add_bench_subcommand
from autoglm.cli.logging import configure_logging
from autoglm.cli.settings import add_config_arguments, add_draw_arguments, announced_config
from autoglm.config import ConfigError
from autoglm.cli.keys import add_keys_subcommand
from autoglm.cli.models import add_models_subcommand
from autoglm.cli.perplexity import add_eval_ppl_subcommand
from autoglm.cli.quantize import add_quantize_subcommand
from autoglm.cli.serve import add_serve_subcommand


def _generate(args: argparse.Namespace) -> int:
    from autoglm.llm import LLM
    from autoglm.progress import show_progress
    from autoglm.sampling_params import SamplingParams

    config = announced_config(args)
    params = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, max_tokens=args.max_tokens,
        stop=args.stop or None,
    )
    llm = LLM.from_config(config)
    for output in llm.generate(args.prompts, params, use_tqdm=show_progress()):
        completion = output.outputs[0]
        print(f"--- prompt: {output.prompt!r}")
        print(output.prompt + completion.text)
        print(f"--- {len(completion.token_ids)} tokens, finish_reason={completion.finish_reason}")
    return 0


def _add_generate(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate", help="complete one or more prompts offline",
        description="Complete each prompt with the engine and print it with its completion.",
    )
    parser.add_argument("prompts", nargs="+", metavar="PROMPT", help="a prompt text; give several to batch them")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--max-tokens", type=int, default=64, help="tokens to generate per prompt (default: 64)")
    add_draw_arguments(sampling)
    sampling.add_argument("--stop", action="append", metavar="TEXT",
                          help="end a completion where this text appears, leaving it out; repeatable (default: none)")
    add_config_arguments(parser)
    parser.set_defaults(handler=_generate)


# Each entry adds one subcommand; modules with heavier imports load only when chosen.
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_generate, add_serve_subcommand, add_eval_ppl_subcommand, add_bench_subcommand, add_quantize_subcommand,
    add_keys_subcommand, add_models_subcommand,
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


if __name__ == "__main__":
    sys.exit(main())
