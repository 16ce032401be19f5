"""What each kind of marker renders, and the document with every marker's region rewritten.

A marker names its kind and then its arguments: results files (``*.json``, relative to the
document), ``LABEL=FILE`` pairs, plain words (a prompt length, a workload), and for a figure
inside a sentence an optional Python format such as ``{:.1f}x`` as the last argument.
Adding a results file to the documents takes a marker that names it, nothing more.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoglm.bench.batch import report as batch_report
from autoglm.bench.figures import (batch_tables, embed_tables, glance_tables, image_tables, kv_tier_tables,
                                   llamacpp_tables, lora_tables, pipeline_tables, quantization_tables, structured_tables,
                                   tables, tenant_tables)
from autoglm.bench.figures.markers import Marker, fill_markers
from autoglm.bench.lora import report as lora_report
from autoglm.bench.results import quantities as q
from autoglm.bench.results.machine import describe_machine
from autoglm.bench.results.results_files import ResultsFile, ResultsFolder
from autoglm.bench.soak import report as soak_report
from autoglm.bench.structured import report as structured_report
from autoglm.bench.tenants import report as tenants_report

RESULTS_SUFFIX = ".json"


def _value(file: ResultsFile, path: str, factor: str = "1") -> float:
    """A number as the results file stores it, times ``factor`` (``1e-9`` for giga-)."""
    return file.at(path) * float(factor)


def _ratio(numerator: ResultsFile, numerator_path: str, denominator: ResultsFile, denominator_path: str) -> float:
    return numerator.at(numerator_path) / denominator.at(denominator_path)


def _difference(minuend: ResultsFile, minuend_path: str, subtrahend: ResultsFile, subtrahend_path: str) -> float:
    return minuend.at(minuend_path) - subtrahend.at(subtrahend_path)


BLOCKS: dict[str, Callable[..., str]] = {
    "roofline-limits": tables.roofline_limits,
    "roofline-bounds": tables.roofline_bounds,
    "linear-paths": tables.linear_paths,
    "latency": tables.latency,
    "throughput": tables.throughput,
    "step-profile": tables.step_profile,
    "linear-path-calls": tables.linear_path_calls,
    "serving": tables.serving,
    "ab": tables.ab,
    "kv-cache-accuracy": tables.kv_cache_accuracy,
    "soak": tables.soak,
    "speculative": tables.speculative,
    "quant-accuracy": quantization_tables.quant_accuracy,
    "quant-kernels": quantization_tables.quant_kernels,
    "quant-memory": quantization_tables.quant_memory,
    "tenants": tenant_tables.tenants,
    "structured": structured_tables.structured,
    "glance": glance_tables.glance,
    "compare-llamacpp": llamacpp_tables.compare_llamacpp,
    "images": image_tables.images,
    "batch": batch_tables.batch,
    "kv-tiers": kv_tier_tables.kv_tiers,
    "embed": embed_tables.embed,
    "pipeline": pipeline_tables.pipeline,
    "lora": lora_tables.lora,
}
# Figures inside sentences: how each is computed, and how it is written unless the marker says.
INLINE: dict[str, tuple[Callable[..., Any], str]] = {
    "machine": (lambda file: describe_machine(file.machine), "{}"),
    "value": (_value, ""),
    "ratio": (_ratio, "{:.2f}x"),
    "difference": (_difference, "{:+.2f}"),
    "ttft-speedup": (q.ttft_speedup, "{:.2f}x"),
    "decode-ratio": (q.decode_ratio, "{:.2f}x"),
    "decode-bound": (q.decode_bound_fraction, "{:.0%}"),
    "gemv-bandwidth": (q.gemv_bandwidth, "{:.0f} GB/s"),
    "throughput-ratio": (q.throughput_ratio, "{:.2f}x"),
    "compute-bound": (q.compute_bound_fraction, "{:.0%}"),
    "prefix-cache-ttft": (q.prefix_cache_ttft_ratio, "{:.1f}x"),
    "step-share": (q.step_share, "{:.1%}"),
    "best-matmul": (lambda file, dtype: q.best_matmul(file, dtype).flops_per_s / tables.GIGA, "{:,.0f} GFLOP/s"),
    "matmul-ratio": (q.matmul_ratio, "{:.1f}x"),
    "itl-tail": (q.itl_tail_ratio, "{:.1f}x"),
    "soak-itl-ratio": (lambda file: soak_report.p99_itl_ratio(file.data), "{:.2f}x"),
    "soak-rss-growth": (lambda file: soak_report.rss_growth(file.data), "{:+.1%}"),
    "soak-requests": (lambda file: soak_report.requests_sent(file.data), "{:,}"),
    "tenants-overhead": (lambda file: tenants_report.overhead(file.data), "{:.1%}"),
    "tenants-split": (lambda file: tenants_report.served_split(file.data), "{:.2f}:1"),
    "tenants-flood-ttft": (lambda file: tenants_report.flood_ttft_ratio(file.data), "{:.2f}x"),
    "structured-ratio": (lambda file: structured_report.rate_ratio(file.data), "{:.3f}x"),
    "batch-ttft-ratio": (lambda file: batch_report.ttft_ratio(file.data), "{:.2f}x"),
    "lora-ratio": (lambda file, rank, num_adapters: lora_report.ratio_at(file.data, rank, num_adapters), "{:.2f}x"),
}


def _argument(word: str, folder: ResultsFolder) -> Any:
    label, separator, name = word.rpartition("=")
    if separator and name.endswith(RESULTS_SUFFIX):
        return label, folder.load(name)
    return folder.load(word) if word.endswith(RESULTS_SUFFIX) else word


def _kind(table: dict[str, Any], marker: Marker) -> Any:
    if marker.kind not in table:
        where = "a table" if marker.block else "a figure inside a sentence"
        raise ValueError(f"no {marker.kind!r} figure as {where}; known: {', '.join(table)}")
    return table[marker.kind]


def render_marker(marker: Marker, folder: ResultsFolder) -> str:
    if marker.block:
        return _kind(BLOCKS, marker)(*(_argument(word, folder) for word in marker.args))
    compute, written_as = _kind(INLINE, marker)
    words = list(marker.args)
    if words and "{" in words[-1]:
        written_as = words.pop()
    if not written_as:
        raise ValueError(f"a {marker.kind!r} figure needs a format as its last argument, e.g. '{{:.1f}} s'")
    return written_as.format(compute(*(_argument(word, folder) for word in words)))


def render_document(text: str, document_folder: Path) -> str:
    """``text`` with every marked region regenerated from the results files it names."""
    folder = ResultsFolder(document_folder)
    return fill_markers(text, lambda marker: render_marker(marker, folder))
