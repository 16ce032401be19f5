"""``autoglm bench make-model``: its options, and the checkpoint they describe written to a folder."""
from __future__ import annotations

import argparse
import json
from typing import Any

from autoglm.bench.lib.arguments import CHECKPOINT_DTYPES
from autoglm.bench.make_model.shapes import MODEL_SHAPES


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


def _make_model(args: argparse.Namespace) -> int:
    from autoglm.bench.make_model.checkpoint import make_model

    overrides = dict(args.override)
    if args.layers is not None:
        overrides[MODEL_SHAPES[args.shape].layers_key] = args.layers
    folder = make_model(args.shape, args.out, dtype=args.dtype, seed=args.seed, overrides=overrides)
    print(f"wrote a random-weight {args.shape} checkpoint ({args.dtype}, seed {args.seed}) to {folder}")
    return 0


def add_make_model_command(subparsers) -> None:
    parser = subparsers.add_parser("make-model", help="write a random-weight checkpoint of a real model's shape")
    parser.add_argument("--shape", required=True, choices=list(MODEL_SHAPES))
    parser.add_argument("--out", required=True, help="folder to write the checkpoint into")
    parser.add_argument("--layers", type=int, help="number of decoder layers instead of the real model's")
    parser.add_argument("--dtype", default="bfloat16", choices=CHECKPOINT_DTYPES,
                        help="dtype the weights are stored in (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the same seed writes the same weights (default: %(default)s)")
    parser.add_argument("--override", type=_config_override, action="append", default=[], metavar="KEY=VALUE",
                        help="replace one config.json value (JSON), e.g. hidden_size=64, or a nested one, "
                             "e.g. text_config.hidden_size=64; repeatable")
    parser.set_defaults(handler=_make_model)
