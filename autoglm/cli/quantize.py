"""``autoglm quantize``: write a checkpoint's projections as int8/int4 in the ``compressed-tensors`` format."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from autoglm.cli.perplexity import read_text_to_score

METHODS = ("int8", "int4")


def _quantize(args: argparse.Namespace) -> int:
    from autoglm.corpus import read_corpus
    from autoglm.model_paths import resolve_model_path
    from autoglm.models.linear_method import WeightQuantization
    from autoglm.quantize.writer import quantize_checkpoint

    quantization = WeightQuantization.from_settings(args.method, args.group_size, args.quantize_lm_head)
    # Read before the (slow) quantizing, so a bad file fails at once.
    text = (read_text_to_score(args.calibration_text) if args.calibration_text else read_corpus().held_out) \
        if args.report else None
    model_dir = resolve_model_path(args.model)
    out_dir = quantize_checkpoint(model_dir, args.out, quantization)
    print(f"wrote {args.method} weights of {model_dir} to {out_dir} (compressed-tensors)")
    if text is not None:
        from autoglm.quantize.report import measure_report, report_lines

        report = measure_report(model_dir, out_dir, quantization, args.method, text)
        print("\n".join(report_lines(report)))
        if args.output_json is not None:
            args.output_json.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    return 0


def add_quantize_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "quantize", help="write a checkpoint with int8/int4 weights (compressed-tensors format)",
        description="Quantize every decoder projection's weights (symmetric, per output channel or group-wise) "
                    "and write them in the compressed-tensors format that this engine, vLLM and transformers load.",
    )
    parser.add_argument("--model", metavar="FOLDER",
                        help="float checkpoint folder (default: the embedded default model)")
    parser.add_argument("--out", type=Path, required=True, metavar="FOLDER",
                        help="folder to write the quantized checkpoint to")
    parser.add_argument("--method", required=True, choices=METHODS, help="int8 (W8A16) or int4 (W4A16)")
    parser.add_argument("--group-size", type=int, metavar="N",
                        help="input columns sharing one scale (default: per output channel for int8, 128 for int4)")
    parser.add_argument("--quantize-lm-head", action="store_true", help="quantize an untied LM head too")
    parser.add_argument("--report", action="store_true",
                        help="print each layer's weight and output error, next-token agreement and the perplexity "
                             "before and after, on the calibration text")
    parser.add_argument("--calibration-text", type=Path, metavar="FILE",
                        help="UTF-8 text the report measures on (default: the shipped corpus's held-out part)")
    parser.add_argument("--output-json", type=Path, metavar="FILE",
                        help="with --report, also write the report to this file")
    parser.set_defaults(handler=_quantize)
