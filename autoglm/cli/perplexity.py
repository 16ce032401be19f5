"""``autoglm eval-ppl``: loss per token and per character of a text file, or of the held-out corpus."""
from __future__ import annotations

import argparse
from pathlib import Path

from autoglm.cli.settings import add_config_arguments, announced_config


def read_text_to_score(path: Path) -> str:
    """The file's text, checked before any model loads; each problem is one line naming the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"--text: no such file: {path}") from None
    except OSError as error:
        raise ValueError(f"--text: cannot read {path}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"--text: {path} is not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start}); "
            "convert it to UTF-8"
        ) from None
    if not text.strip():
        raise ValueError(f"--text: {path} is empty; give a file with text to score")
    return text


def _eval_ppl(args: argparse.Namespace) -> int:
    config = announced_config(args)  # a bad value is refused before the engine's modules load
    from autoglm.corpus import read_corpus
    from autoglm.llm import LLM
    from autoglm.perplexity import evaluate_perplexity
    from autoglm.progress import show_progress

    text = read_corpus().held_out if args.held_out else read_text_to_score(args.text)
    result = evaluate_perplexity(LLM.from_config(config), text, window=args.window, use_tqdm=show_progress())
    print(f"characters: {result.num_characters}  tokens: {result.num_tokens}  scored: {result.num_scored_tokens}")
    print(f"loss per token: {result.loss_per_token:.4f} nats  (perplexity {result.perplexity:.2f})")
    print(f"loss per character: {result.loss_per_character:.4f} nats")
    return 0


def add_eval_ppl_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval-ppl", help="score a text file: loss per token and per character",
        description="Score a text with the model's own prompt log-probabilities, in overlapping context windows.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", type=Path, metavar="FILE", help="UTF-8 text file to score")
    source.add_argument(
        "--held-out", action="store_true",
        help="score the part of the shipped Tiny Shakespeare corpus held out from the default model's training "
             "(the split its model card quotes)",
    )
    parser.add_argument("--window", type=int, default=None, metavar="N",
                        help="tokens per scoring window (default: the context length less one)")
    add_config_arguments(parser)
    parser.set_defaults(handler=_eval_ppl)
