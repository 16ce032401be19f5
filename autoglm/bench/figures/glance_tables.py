"""The table docs/PERFORMANCE.md opens with: on each CPU measured, the engine against transformers at a glance.

One row per CPU, from that CPU's ``bench latency`` and ``bench throughput`` files: batch-1 decode and time
to first token at the prompt lengths the marker names, and the mixed workload's output throughput, each
the engine's figure with its ratio to transformers' beside it (above 1x: the engine is faster); then
llama.cpp at the same precision, pending until a benchmark measures it.
"""
from __future__ import annotations

from collections.abc import Callable

from autoglm.bench.results import quantities as q
from autoglm.bench.results.formats import bold, duration, markdown_table, rate, ratio
from autoglm.bench.results.machine import describe_cpu, same_device
from autoglm.bench.results.results_files import ResultsFile

MIXED = "mixed"
LLAMA_CPP = "pending"
NOT_MEASURED = "not measured"
# Per prompt length: the column's name, the engine's figure as written, and its ratio to transformers'.
LATENCY_COLUMNS: tuple[tuple[str, Callable[[dict], str], Callable[[ResultsFile, str], float]], ...] = (
    ("batch-1 decode", lambda engine: rate(engine["decode_tokens_per_s"]), q.decode_ratio),
    ("TTFT", lambda engine: duration(engine["mean_ttft_s"]), q.ttft_speedup),
)


def _latency_cell(latency: ResultsFile, input_len: str, written: Callable[[dict], str],
                  versus: Callable[[ResultsFile, str], float]) -> str:
    if input_len not in latency.at("input_lens"):
        return NOT_MEASURED
    engine = q.latency_side(latency, input_len, q.ENGINE)
    return f"{written(engine)} ({bold(ratio(versus(latency, input_len)))})"


def _row(latency: ResultsFile, throughput: ResultsFile, input_lens: list[str]) -> list[str]:
    if not same_device(latency.machine, throughput.machine):
        raise ValueError(f"{latency.name} and {throughput.name} were measured on different machines; "
                         "a row is one CPU's")
    files = f"[latency]({latency.name}), [throughput]({throughput.name})"
    cells = [f"{describe_cpu(latency.machine)} ({files})"]
    cells += [_latency_cell(latency, input_len, written, versus)
              for _, written, versus in LATENCY_COLUMNS for input_len in input_lens]
    mixed = q.output_rate(q.throughput_side(throughput, MIXED, q.ENGINE))
    cells += [f"{rate(mixed)} ({bold(ratio(q.throughput_ratio(throughput, MIXED)))})", LLAMA_CPP]
    return cells


def glance(input_lens: str, *files: ResultsFile) -> str:
    """``input_lens`` such as ``128,512``, then for each CPU its latency file and its throughput file (with
    a ``mixed`` workload)."""
    if not files or len(files) % 2:
        raise ValueError("give each CPU's latency file, then its throughput file")
    lengths = input_lens.split(",")
    header = ["CPU (the results files)",
              *(f"{name}, {length}-token prompt" for name, _, _ in LATENCY_COLUMNS for length in lengths),
              "mixed batch, output", "llama.cpp, same precision"]
    rows = [_row(latency, throughput, lengths) for latency, throughput in zip(files[::2], files[1::2])]
    return markdown_table(header, rows)
