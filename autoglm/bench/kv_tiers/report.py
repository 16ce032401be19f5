"""The KV tiers benchmark's results document and its table, for the terminal and docs/PERFORMANCE.md alike."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autoglm.bench.kv_tiers.measure import RECOMPUTED, Measurement
from autoglm.bench.results.report import format_table, machine_info, print_and_write

HEADER = ("prefix KV", "median TTFT", "vs recomputed", "blocks restored per turn (host, disk)")


def results_document(results: dict[str, Measurement], settings: dict[str, Any]) -> dict[str, Any]:
    return {"machine": machine_info(), "settings": settings,
            "sources": {name: measurement.to_dict() for name, measurement in results.items()}}


def table_rows(document: dict[str, Any]) -> list[list[str]]:
    """One row per place the prefix's KV came from, recomputation first."""
    sources = document["sources"]
    recomputed = sources[RECOMPUTED]["median_ttft_s"]
    trials = len(sources[RECOMPUTED]["ttft_s"])
    rows = []
    for name, source in sources.items():
        restored = source["restored_blocks"]
        rows.append([name, f"{source['median_ttft_s'] * 1e3:,.1f} ms",
                     f"{recomputed / source['median_ttft_s']:.2f}x faster" if name != RECOMPUTED else "-",
                     "-" if not restored else
                     f"{restored.get('host', 0) / trials:g}, {restored.get('disk', 0) / trials:g}"])
    return rows


def report_kv_tiers(document: dict[str, Any], output_json: Path | None) -> None:
    print_and_write([format_table(HEADER, table_rows(document))], document, output_json)
