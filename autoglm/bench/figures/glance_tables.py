"""The table docs/PERFORMANCE.md opens with: on each CPU measured, the engine against transformers at a glance.

One row per CPU, from that CPU's ``bench latency`` and ``bench throughput`` files: batch-1 decode and time
to first token at the prompt lengths the marker names, and the mixed workload's output throughput, each
the engine's figure with its ratio to transformers' beside it (above 1x: the engine is faster); then
the engine's batch-1 decode as a multiple of llama.cpp's at the same precision, from a ``bench
compare-llamacpp`` file given as ``llamacpp=FILE`` after that CPU's two files, pending without one.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from autoglm.bench.figures.llamacpp_tables import glance_cell
from autoglm.bench.results import quantities as q
from autoglm.bench.results.formats import bold, duration, markdown_table, rate, ratio
from autoglm.bench.results.machine import describe_cpu, same_device
from autoglm.bench.results.results_files import ResultsFile

MIXED = "mixed"
PENDING = "pending"
LLAMA_CPP_LABEL = "llamacpp"  # marks a CPU's compare-llamacpp file among the glance marker's files
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


@dataclass
class CpuFiles:
    """One row's results files."""

    latency: ResultsFile
    throughput: ResultsFile
    llama_cpp: ResultsFile | None = None  # its bench compare-llamacpp file, if measured


def _row(cpu: CpuFiles, input_lens: list[str]) -> list[str]:
    latency, throughput = cpu.latency, cpu.throughput
    if not same_device(latency.machine, throughput.machine):
        raise ValueError(f"{latency.name} and {throughput.name} were measured on different machines; "
                         "a row is one CPU's")
    files = f"[latency]({latency.name}), [throughput]({throughput.name})"
    files += f", [llama.cpp]({cpu.llama_cpp.name})" if cpu.llama_cpp is not None else ""
    cells = [f"{describe_cpu(latency.machine)} ({files})"]
    cells += [_latency_cell(latency, input_len, written, versus)
              for _, written, versus in LATENCY_COLUMNS for input_len in input_lens]
    mixed = q.output_rate(q.throughput_side(throughput, MIXED, q.ENGINE))
    cells += [f"{rate(mixed)} ({bold(ratio(q.throughput_ratio(throughput, MIXED)))})",
              PENDING if cpu.llama_cpp is None else glance_cell(latency, cpu.llama_cpp)]
    return cells


def _cpus(files: tuple[ResultsFile | tuple[str, ResultsFile], ...]) -> list[CpuFiles]:
    """Each CPU's latency and throughput files, and the ``llamacpp=FILE`` that may follow them."""
    cpus: list[CpuFiles] = []
    plain: list[ResultsFile] = []
    for file in files:
        if isinstance(file, tuple):
            label, comparison = file
            if label != LLAMA_CPP_LABEL or plain or not cpus or cpus[-1].llama_cpp is not None:
                raise ValueError(f"{label}={comparison.name}: give {LLAMA_CPP_LABEL}=FILE once per CPU, right "
                                 "after its latency and throughput files")
            cpus[-1].llama_cpp = comparison
            continue
        plain.append(file)
        if len(plain) == 2:
            cpus.append(CpuFiles(*plain))
            plain = []
    if not cpus or plain:
        raise ValueError("give each CPU's latency file, then its throughput file (then llamacpp=FILE, if measured)")
    return cpus


def glance(input_lens: str, *files: ResultsFile | tuple[str, ResultsFile]) -> str:
    """``input_lens`` such as ``128,512``, then for each CPU its latency file and its throughput file (with
    a ``mixed`` workload), and optionally ``llamacpp=`` its ``bench compare-llamacpp`` file."""
    lengths = input_lens.split(",")
    header = ["CPU (the results files)",
              *(f"{name}, {length}-token prompt" for name, _, _ in LATENCY_COLUMNS for length in lengths),
              "mixed batch, output", "llama.cpp, same precision"]
    rows = [_row(cpu, lengths) for cpu in _cpus(files)]
    return markdown_table(header, rows)
