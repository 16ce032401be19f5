"""``autoglm bench compare-llamacpp``: its options, and the run from settings to tables and JSON."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoglm.bench.lib.arguments import add_results_and_engine_settings, positive_int
from autoglm.bench.llamacpp.inputs import CompareLlamaCppError, gguf_files, llama_bench_path
from autoglm.bench.llamacpp.precisions import PRECISIONS
from autoglm.cli.settings import announced_config

# Counts both sides take, as llama-bench's -p, -n and -r: the flag, its default, what it counts.
LLAMA_BENCH_COUNTS = (
    ("--n-prompt", 512, "prompt tokens of the prompt-processing test, as llama-bench -p"),
    ("--n-gen", 128, "tokens generated in the decode test, as llama-bench -n"),
    ("--repetitions", 5, "timed runs of each test on each side, as llama-bench -r"),
)


def _compare(args: argparse.Namespace) -> int:
    try:
        executable, ggufs = llama_bench_path(args.llama_cpp_bin), gguf_files(args.gguf)
        return _run(args, executable, ggufs)
    except CompareLlamaCppError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, executable: Path, ggufs: dict[str, Path]) -> int:
    import torch

    from autoglm.bench.llamacpp.measure import CompareSettings, run_comparison
    from autoglm.bench.llamacpp.report import report_comparison

    config = announced_config(args)
    threads = config.num_threads or torch.get_num_threads()
    settings = CompareSettings(config=config.model_copy(update={"num_threads": threads}), llama_bench=executable,
                               ggufs=ggufs, threads=threads, n_prompt=args.n_prompt, n_gen=args.n_gen,
                               repetitions=args.repetitions)
    report_comparison(settings, run_comparison(settings), args.output_json)
    return 0


def add_llamacpp_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare-llamacpp", help="batch-1 decode and prompt processing against llama.cpp's llama-bench, per precision")
    parser.add_argument("--llama-cpp-bin", type=Path, required=True, metavar="DIR",
                        help="the bin/ folder of a llama.cpp build, holding llama-bench")
    parser.add_argument("--gguf", action="append", default=[], metavar="PRECISION=FILE",
                        help=f"a GGUF of the --model checkpoint's weights, once per precision compared "
                             f"({', '.join(f'{p.name} with {p.gguf_type}' for p in PRECISIONS.values())}), "
                             "e.g. --gguf int8=M.q8_0.gguf")
    for flag, default, meaning in LLAMA_BENCH_COUNTS:
        parser.add_argument(flag, type=positive_int, default=default, metavar="N",
                            help=f"{meaning} (default: %(default)s)")
    add_results_and_engine_settings(parser, "also write every figure, the machine and llama.cpp's build to this file")
    parser.set_defaults(handler=_compare)
