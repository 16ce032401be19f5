"""The speculative benchmark's results document and its one table, for the terminal and the docs alike."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autoglm.bench.results.report import format_table, machine_info, print_and_write
from autoglm.bench.speculative.measure import PLAIN, SideResult

HEADER = ("decoding", "acceptance", "tokens per target pass", "decode tok/s", "speed-up", "same tokens")


def results_document(results: dict[str, SideResult], settings: dict[str, Any]) -> dict[str, Any]:
    plain = results[PLAIN]
    return {
        "machine": machine_info(),
        "settings": settings,
        "sides": {name: {**side.to_dict(), "identical_output": side.outputs == plain.outputs}
                  for name, side in results.items()},
    }


def table_rows(document: dict[str, Any]) -> list[list[str]]:
    """One row per side: acceptance first, then the tokens each target pass yields, then the speed it gives."""
    sides = document["sides"]
    plain_rate = sides[PLAIN]["decode_tokens_per_s"]
    rows = []
    for name, side in sides.items():
        passes = side["decode_tokens"] - side["num_accepted_tokens"]  # each pass yields one token past its kept ones
        acceptance = side["acceptance_rate"]
        rows.append([
            name,
            "-" if acceptance is None else f"{acceptance:.0%}",
            f"{side['decode_tokens'] / passes:.2f}",
            f"{side['decode_tokens_per_s']:,.1f}",
            f"{side['decode_tokens_per_s'] / plain_rate:.2f}x",
            "yes" if side["identical_output"] else "NO",
        ])
    return rows


def report_speculative(document: dict[str, Any], output_json: Path | None) -> None:
    print_and_write([format_table(HEADER, table_rows(document))], document, output_json)
