"""What ``bench lora`` found, computed from its results file: each kind's output tokens/s in its quickest round
(on a shared machine the round others disturbed least), and its ratio to the base model alone at that rank."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from autoglm.bench.results.report import machine_info, print_and_write

if TYPE_CHECKING:
    from autoglm.bench.lora.measure import LoRARun

# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = ("ranks", "num_adapters", "batch_size", "input_len", "output_len", "rounds")


def tokens_per_s(entry: dict[str, Any]) -> float:
    return entry["output_tokens"] / min(entry["rounds_s"])


def base_entry(document: dict[str, Any], rank: int) -> dict[str, Any]:
    """The base model's round as the engine runs it (its decode steps native where they may be)."""
    return next(entry for entry in document["results"]
                if entry["rank"] == rank and entry["num_adapters"] == 0 and not entry["layer_by_layer"])


def ratio_to_base(document: dict[str, Any], entry: dict[str, Any]) -> float:
    """Its tokens/s over the base model's alone, at the same rank and on the same engine."""
    return tokens_per_s(entry) / tokens_per_s(base_entry(document, entry["rank"]))


def ratio_at(document: dict[str, Any], rank: str, num_adapters: str) -> float:
    """The ratio of the kind with ``num_adapters`` at ``rank`` (marker words, so strings)."""
    entry = next(entry for entry in document["results"]
                 if entry["rank"] == int(rank) and entry["num_adapters"] == int(num_adapters))
    return ratio_to_base(document, entry)


def kind_name(entry: dict[str, Any]) -> str:
    if entry["num_adapters"]:
        return "1 adapter" if entry["num_adapters"] == 1 else f"{entry['num_adapters']} distinct adapters"
    return "the base model alone, layer by layer" if entry["layer_by_layer"] else "the base model alone"


def summary_lines(document: dict[str, Any]) -> list[str]:
    lines = []
    for entry in document["results"]:
        kind = kind_name(entry)
        lines.append(f"rank {entry['rank']}, {kind}: {tokens_per_s(entry):,.1f} output tok/s "
                     f"({ratio_to_base(document, entry):.2f}x the base)")
    return lines


def report_lora(args: argparse.Namespace, run: LoRARun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    settings["engine"] = run.engine_settings
    document = {"settings": settings, "machine": machine_info(), "results": [entry.to_dict() for entry in run.results]}
    print_and_write(summary_lines(document), document, args.output_json)
    return document
