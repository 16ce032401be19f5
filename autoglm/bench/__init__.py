"""Benchmarks of the engine and of a running server, and the figures the docs quote from their results.

One package per ``autoglm bench`` subcommand, each its options and handler (``command``), its run
(``measure``) and its output (``report``); what they share is in ``lib`` (HTTP load, request sets, engine
runs, flags) and ``results`` (results files, their quantities and formats). ``autoglm.bench.cli.add_bench_subcommand``
registers ``autoglm bench`` with the main CLI.
"""
