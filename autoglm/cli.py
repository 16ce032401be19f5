"""``autoglm`` command line: generate, and the subcommands other modules register."""
from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Callable

from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.model_paths import DEFAULT_MODEL_DIR, DEFAULT_MODEL_NAME
from autoglm.bench.cli import add_bench_subcommand
from autoglm.server.serve import add_serve_subcommand


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` plus one ``--kebab-case`` flag per setting; values are validated by the config."""
    parser.add_argument("--config", help="settings file (YAML, JSON or TOML); AUTOGLM_* variables override it")
    group = parser.add_argument_group("engine settings (override the file and environment)")
    for name in AutoGLMConfig.field_names():
        description = AutoGLMConfig.model_fields[name].description
        group.add_argument("--" + name.replace("_", "-"), dest=name, default=None, metavar="VALUE", help=description)


def config_from_args(args: argparse.Namespace) -> AutoGLMConfig:
    overrides = {name: getattr(args, name) for name in AutoGLMConfig.field_names() if hasattr(args, name)}
    return AutoGLMConfig.from_sources(args.config, overrides=overrides)


def announce_model(config: AutoGLMConfig) -> None:
    """The first line of output says which model runs, the embedded default included."""
    if config.model is None:
        print(f"Using the embedded default model {DEFAULT_MODEL_NAME} ({DEFAULT_MODEL_DIR})", flush=True)
    else:
        print(f"Using model {config.model}", flush=True)


def _generate(args: argparse.Namespace) -> int:
    from autoglm.llm import LLM
    from autoglm.sampling_params import SamplingParams

    config = config_from_args(args)
    announce_model(config)
    params = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, max_tokens=args.max_tokens,
        stop=args.stop or None,
    )
    llm = LLM.from_config(config)
    for output in llm.generate(args.prompts, params, use_tqdm=False):
        completion = output.outputs[0]
        print(f"--- prompt: {output.prompt!r}")
        print(output.prompt + completion.text)
        print(f"--- {len(completion.token_ids)} tokens, finish_reason={completion.finish_reason}")
    return 0


def _add_generate(subparsers) -> None:
    parser = subparsers.add_parser("generate", help="complete one or more prompts offline")
    parser.add_argument("prompts", nargs="+", help="prompt texts")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--stop", action="append", help="a stop string (repeatable)")
    add_config_arguments(parser)
    parser.set_defaults(handler=_generate)


def _eval_ppl(args: argparse.Namespace) -> int:
    from pathlib import Path

    from autoglm.llm import LLM
    from autoglm.perplexity import evaluate_perplexity

    config = config_from_args(args)
    announce_model(config)
    text = Path(args.text).read_text(encoding="utf-8")
    result = evaluate_perplexity(LLM.from_config(config), text, window=args.window)
    print(f"characters: {result.num_characters}  tokens: {result.num_tokens}  scored: {result.num_scored_tokens}")
    print(f"loss per token: {result.loss_per_token:.4f} nats  (perplexity {math.exp(result.loss_per_token):.2f})")
    print(f"loss per character: {result.loss_per_character:.4f} nats")
    return 0


def _add_eval_ppl(subparsers) -> None:
    parser = subparsers.add_parser("eval-ppl", help="score a text file: loss per token and per character")
    parser.add_argument("--text", required=True, help="UTF-8 text file to score")
    parser.add_argument("--window", type=int, default=None, help="tokens per scoring window (default: the context)")
    add_config_arguments(parser)
    parser.set_defaults(handler=_eval_ppl)


# Each entry adds one subcommand; modules with heavier imports load only when chosen.
SUBCOMMANDS: list[Callable] = [_add_generate, add_serve_subcommand, _add_eval_ppl, add_bench_subcommand]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autoglm", description="Open-AutoGLM inference engine")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ConfigError, ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
