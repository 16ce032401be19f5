"""``autoglm bench ...``: the benchmark subcommands, also runnable as ``main(argv)``.

Each entry of :data:`BENCH_COMMANDS` adds one subcommand, the way ``autoglm.cli`` does.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoglm.bench.ab.command import add_ab_command
from autoglm.bench.lib.arguments import add_results_and_engine_settings
from autoglm.bench.kv_accuracy.command import add_kv_accuracy_command
from autoglm.bench.lib.sampling import BenchSampling, add_sampling_arguments
from autoglm.bench.serve.command import add_serve_command
from autoglm.bench.lib.shapes import MODEL_SHAPES
from autoglm.bench.soak.command import add_soak_command
from autoglm.bench.speculative.command import add_speculative_command
from autoglm.bench.structured.command import add_structured_command
from autoglm.bench.swap.command import add_swap_command
from autoglm.bench.tenants.command import add_tenants_command
from autoglm.bench.lib.workloads import WORKLOADS
from autoglm.cli_settings import announced_config

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


def _add_baseline_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--baseline", default="transformers", choices=BASELINES,
                        help="what the engine is compared with on the same requests; none runs it alone "
                             "(default: %(default)s)")


def _chosen_baseline(args: argparse.Namespace) -> str | None:
    return None if args.baseline == NO_BASELINE else args.baseline


def _add_num_threads_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-threads", type=int, help="torch CPU threads (default: torch's choice)")


def _use_num_threads(args: argparse.Namespace) -> None:
    """A given ``--num-threads`` sets torch's; torch loads here, when the command runs."""
    import torch

    if args.num_threads is not None:
        torch.set_num_threads(args.num_threads)


def _add_profile_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", action="store_true",
                        help="print where the engine's step time goes (slower: it times every phase)")


# Handlers import their modules when run: `autoglm --help` should not load torch.
def _make_model(args: argparse.Namespace) -> int:
    from autoglm.bench.make_model.checkpoint import make_model

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
    parser.add_argument("--dtype", default="bfloat16", choices=CHECKPOINT_DTYPES,
                        help="dtype the weights are stored in (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="the same seed writes the same weights (default: %(default)s)")
    parser.add_argument("--override", type=_config_override, action="append", default=[], metavar="KEY=VALUE",
                        help="replace one config.json value (JSON), e.g. hidden_size=64; repeatable")
    parser.set_defaults(handler=_make_model)


def _throughput(args: argparse.Namespace) -> int:
    from autoglm.bench.throughput.measure import ThroughputSettings, report_throughput, run_throughput

    config = announced_config(args)
    settings = ThroughputSettings(
        config=config,
        workloads=list(WORKLOADS) if args.workload == ALL_WORKLOADS else [args.workload],
        num_prompts=args.num_prompts,
        baseline=_chosen_baseline(args),
        length_scale=args.length_scale,
        profile=args.profile,
        sampling=BenchSampling.from_args(args),
    )
    report_throughput(settings, run_throughput(settings), args.output_json)
    return 0


def _add_throughput(subparsers) -> None:
    parser = subparsers.add_parser("throughput", help="tokens per second of the engine against transformers")
    parser.add_argument("--workload", default=ALL_WORKLOADS, choices=[*WORKLOADS, ALL_WORKLOADS],
                        help="which request mix to run (default: %(default)s)")
    parser.add_argument("--num-prompts", type=int,
                        help="requests per workload (default: 64 each, 32 for shared-prefix)")
    _add_baseline_flag(parser)
    parser.add_argument("--length-scale", type=float, default=1.0,
                        help="multiply every prompt and output length, 0.1 for a quick check (default: %(default)s)")
    _add_profile_flag(parser)
    add_sampling_arguments(parser)
    add_results_and_engine_settings(parser, "also write the results and settings to this file")
    parser.set_defaults(handler=_throughput)


def _roofline(args: argparse.Namespace) -> int:
    from autoglm.bench.roofline.measure import FULL_SIZES, QUICK_SIZES, measure_roofline, report_roofline
    from autoglm.platforms import resolve_device

    _use_num_threads(args)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    report_roofline(measure_roofline(resolve_device(args.device), args.dtype, sizes, args.model), args.output_json)
    return 0


def _add_roofline(subparsers) -> None:
    parser = subparsers.add_parser("roofline", help="memory bandwidth and matmul speed, and a model's speed bounds")
    parser.add_argument("--model", help="checkpoint folder to bound: batch-1 decode and batched tokens per second")
    parser.add_argument("--device", default="cpu",
                        help="'cpu', 'cuda', 'cuda:N', 'xpu', 'mps' or 'auto' (default: %(default)s)")
    parser.add_argument("--dtype", default="bfloat16", choices=CHECKPOINT_DTYPES,
                        help="the dtype asked of the engine; bounds are given for the one it computes in, and more "
                             "(default: %(default)s)")
    _add_num_threads_flag(parser)
    parser.add_argument("--quick", action="store_true", help="tiny sizes that check the command, not the machine")
    parser.add_argument("--output-json", type=Path, help="also write the results, for `bench latency --roofline`")
    parser.set_defaults(handler=_roofline)


def _lengths(text: str) -> list[int]:
    """``128,512,2048``: positive token counts."""
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return lengths


def _latency(args: argparse.Namespace) -> int:
    from autoglm.bench.latency.measure import LatencySettings, decode_bounds, report_latency, run_latency

    config = announced_config(args)
    settings = LatencySettings(
        config=config,
        input_lens=args.input_lens,
        output_len=args.output_len,
        num_iters=args.num_iters,
        baseline=_chosen_baseline(args),
        roofline=args.roofline,
        profile=args.profile,
    )
    bounds = decode_bounds(settings)
    report_latency(settings, run_latency(settings), bounds, args.output_json)
    return 0


def _add_latency(subparsers) -> None:
    parser = subparsers.add_parser("latency", help="batch-1 time to first token and decode speed against transformers")
    parser.add_argument("--input-lens", type=_lengths, default=[128, 512, 2048],
                        help="prompt lengths (default: 128,512,2048)")
    parser.add_argument("--output-len", type=int, default=128,
                        help="tokens generated per request (default: %(default)s)")
    parser.add_argument("--num-iters", type=int, default=3,
                        help="timed requests per prompt length, after a warm-up (default: %(default)s)")
    _add_baseline_flag(parser)
    parser.add_argument("--roofline", type=Path, help="a `bench roofline --output-json` file: adds fraction of bound")
    _add_profile_flag(parser)
    add_results_and_engine_settings(parser, "also write the results and settings to this file")
    parser.set_defaults(handler=_latency)


def _quant_kernels(args: argparse.Namespace) -> int:
    import torch

    from autoglm.bench.quant_kernels.measure import QWEN_05B_LAYER_SHAPES, ROW_COUNTS, measure, report_quant_kernels

    _use_num_threads(args)
    shapes, rows = ((QWEN_05B_LAYER_SHAPES[0],), (1, 3)) if args.quick else (QWEN_05B_LAYER_SHAPES, ROW_COUNTS)
    # Many short rounds: the best of them is the one a busy machine disturbed least.
    timings = measure(shapes, rows, getattr(torch, args.dtype), repeats=2 if args.quick else 7,
                      min_round_s=0.005 if args.quick else 0.03)
    report_quant_kernels(timings, args.output_json)
    return 0


def _add_quant_kernels(subparsers) -> None:
    parser = subparsers.add_parser(
        "quant-kernels", help="int8/int4 weight matmul candidates per row count on qwen2.5-0.5b's layer shapes (CPU)")
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"),
                        help="activation dtype; the fused int8/int4 ops take bfloat16 wherever a bfloat16 model runs "
                             "(default: %(default)s)")
    _add_num_threads_flag(parser)
    parser.add_argument("--quick", action="store_true", help="one small shape, two row counts: checks the command")
    parser.add_argument("--output-json", type=Path, help="also write the timings to this file")
    parser.set_defaults(handler=_quant_kernels)


def _add_quantized_model_arguments(parser: argparse.ArgumentParser, handler: Callable) -> None:
    """What quant-accuracy and quant-memory both take: a float model, the int4 group size, a results file."""
    parser.add_argument("--model", help="float checkpoint folder (default: the embedded default model)")
    parser.add_argument("--group-size", type=int, help="int4 group size (default: 128)")
    parser.add_argument("--output-json", type=Path, help="also write the results, for docs/QUANTIZATION.md")
    parser.set_defaults(handler=handler)


def _quant_accuracy(args: argparse.Namespace) -> int:
    from autoglm.bench.quant_accuracy.measure import measure_quant_accuracy, report_quant_accuracy

    report_quant_accuracy(measure_quant_accuracy(args.model, args.group_size), args.output_json)
    return 0


def _add_quant_accuracy(subparsers) -> None:
    parser = subparsers.add_parser(
        "quant-accuracy", help="perplexity, top-1 agreement and KL of int8/int4 weights on the held-out text")
    _add_quantized_model_arguments(parser, _quant_accuracy)


def _quant_memory(args: argparse.Namespace) -> int:
    from autoglm.bench.quant_memory.measure import measure_quant_memory, report_quant_memory

    report_quant_memory(measure_quant_memory(args.model, args.group_size), args.output_json)
    return 0


def _add_quant_memory(subparsers) -> None:
    parser = subparsers.add_parser(
        "quant-memory", help="bytes the engine's model holds in float, int8 and int4, the LM head quantized or not")
    _add_quantized_model_arguments(parser, _quant_memory)


BENCH_COMMANDS: list[Callable] = [_add_make_model, _add_throughput, _add_roofline, _add_latency, add_serve_command,
                                  add_soak_command, add_tenants_command, add_swap_command, add_ab_command,
                                  add_kv_accuracy_command, add_speculative_command, add_structured_command,
                                  _add_quant_kernels,
                                  _add_quant_accuracy, _add_quant_memory]


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
