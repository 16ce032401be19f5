"""Benchmarks of the engine: checkpoints of real model shapes, and throughput against transformers.

``autoglm.bench.cli.add_bench_subcommand`` registers ``autoglm bench`` with the main CLI.
"""
