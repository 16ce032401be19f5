"""``autoglm generate``: complete prompts offline with the engine and print them.

Registering the subcommand imports nothing heavy; the engine loads when it runs.
"""
from __future__ import annotations

import argparse

from autoglm.cli.settings import add_config_arguments, add_draw_arguments, announced_config


def _generate(args: argparse.Namespace) -> int:
    config = announced_config(args)  # a bad value is refused before the engine's modules load
    from autoglm.llm import LLM
    from autoglm.progress import show_progress
    from autoglm.sampling_params import SamplingParams

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


def add_generate_subcommand(subparsers: argparse._SubParsersAction) -> None:
    """Register ``generate`` with the ``autoglm`` command line."""
    parser = subparsers.add_parser(
        "generate", help="complete one or more prompts offline",
        description="Complete each prompt with the engine and print it with its completion.",
    )
    parser.add_argument("prompts", nargs="+", metavar="PROMPT", help="a prompt text; give several to batch them")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--max-tokens", type=int, default=64, metavar="N",
                          help="tokens to generate per prompt (default: 64)")
    add_draw_arguments(sampling)
    sampling.add_argument("--stop", action="append", metavar="TEXT",
                          help="end a completion where this text appears, leaving it out; repeatable (default: none)")
    add_config_arguments(parser)
    parser.set_defaults(handler=_generate)
