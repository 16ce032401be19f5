"""``autoglm bench images``: its options, and the run from settings to table and JSON."""
from __future__ import annotations

import argparse

from autoglm.bench.lib.arguments import (add_baseline_flag, add_results_and_engine_settings, chosen_baseline,
                                         positive_int)
from autoglm.cli.settings import announced_config

# 1,003,520 pixels (1,280 patches of 28 x 28) keeps a phone screenshot legible; a CPU run may want fewer.
DEFAULT_MAX_PIXELS = 1003520


def _batch_size(text: str) -> int:
    """At least 2: a batch of one is the one-at-a-time side."""
    size = positive_int(text)
    if size < 2:
        raise argparse.ArgumentTypeError(f"expected a batch of at least 2 images, got {text!r}")
    return size


def _images(args: argparse.Namespace) -> int:
    from autoglm.bench.images.measure import ImagesSettings, run_images
    from autoglm.bench.images.report import report_images

    settings = ImagesSettings(config=announced_config(args), max_pixels=args.max_pixels,
                              batch_size=args.batch_size, num_iters=args.num_iters, baseline=chosen_baseline(args))
    report_images(settings, run_images(settings), args.output_json)
    return 0


def add_images_command(subparsers) -> None:
    parser = subparsers.add_parser("images", help="a screenshot's time to first token against transformers, the "
                                                  "vision encoder's throughput, and a prefix-cache hit's saving")
    parser.add_argument("--max-pixels", type=positive_int, default=DEFAULT_MAX_PIXELS,
                        help="the largest area the image processor scales the 1080x2400 screenshot into "
                             "(default: %(default)s)")
    parser.add_argument("--batch-size", type=_batch_size, default=4,
                        help="images in the batched encoder call, against one image a call (default: %(default)s)")
    parser.add_argument("--num-iters", type=positive_int, default=3,
                        help="timed repeats of each measure, after a warm-up (default: %(default)s)")
    add_baseline_flag(parser)
    add_results_and_engine_settings(parser, "also write the results and settings to this file")
    parser.set_defaults(handler=_images)
