"""``autoglm bench ...``: the benchmark subcommands, also runnable as ``main(argv)``.

Each entry of :data:`BENCH_COMMANDS` adds one subcommand, the way ``autoglm.cli`` does; each
subcommand's package holds its options (``command``), its run (``measure``) and its output (``report``).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable

from autoglm.bench.ab.command import add_ab_command
from autoglm.bench.batch.command import add_batch_command
from autoglm.bench.embed.command import add_embed_command
from autoglm.bench.images.command import add_images_command
from autoglm.bench.kv_accuracy.command import add_kv_accuracy_command
from autoglm.bench.kv_tiers.command import add_kv_tiers_command
from autoglm.bench.latency.command import add_latency_command
from autoglm.bench.llamacpp.command import add_llamacpp_command
from autoglm.bench.lora.command import add_lora_command
from autoglm.bench.make_model.command import add_make_model_command
from autoglm.bench.pipeline.command import add_pipeline_command
from autoglm.bench.quant_accuracy.command import add_quant_accuracy_command
from autoglm.bench.quant_kernels.command import add_quant_kernels_command
from autoglm.bench.quant_memory.command import add_quant_memory_command
from autoglm.bench.roofline.command import add_roofline_command
from autoglm.bench.serve.command import add_serve_command
from autoglm.bench.soak.command import add_soak_command
from autoglm.bench.speculative.command import add_speculative_command
from autoglm.bench.structured.command import add_structured_command
from autoglm.bench.swap.command import add_swap_command
from autoglm.bench.tenants.command import add_tenants_command
from autoglm.bench.throughput.command import add_throughput_command

BENCH_COMMANDS: list[Callable] = [add_make_model_command, add_throughput_command, add_roofline_command,
                                  add_latency_command, add_serve_command, add_soak_command, add_tenants_command,
                                  add_swap_command, add_ab_command, add_kv_accuracy_command,
                                  add_speculative_command, add_structured_command, add_quant_kernels_command,
                                  add_quant_accuracy_command, add_quant_memory_command,
                                  add_llamacpp_command, add_images_command, add_batch_command,
                                  add_kv_tiers_command, add_embed_command, add_pipeline_command, add_lora_command]


def add_bench_commands(subparsers) -> None:
    for add in BENCH_COMMANDS:
        add(subparsers)


def add_bench_subcommand(subparsers) -> None:
    """Registers ``autoglm bench``; listed in ``autoglm.cli.main.SUBCOMMANDS``."""
    parser = subparsers.add_parser("bench", help="benchmark the engine")
    add_bench_commands(parser.add_subparsers(dest="bench_command", required=True))


def main(argv: list[str] | None = None) -> int:
    """``autoglm bench`` on its own, for scripts and tests."""
    parser = argparse.ArgumentParser(prog="autoglm bench", description="Open-AutoGLM benchmarks")
    add_bench_commands(parser.add_subparsers(dest="bench_command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)
