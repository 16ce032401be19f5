"""What ``bench embed`` found, computed from its results file: embeddings per second of the engine and of
transformers at each input length, the quickest round of each."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from autoglm.bench.results.report import machine_info, print_and_write

if TYPE_CHECKING:
    from autoglm.bench.embed.measure import EmbedRun

# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = ("batch_size", "short_len", "long_len", "rounds", "baseline")


def embeddings_per_s(document: dict[str, Any], entry: dict[str, Any], key: str) -> float:
    """Embeddings a second in the quickest round: on a shared machine, the one others disturbed least."""
    return document["settings"]["batch_size"] / min(entry[key])


def speedup(document: dict[str, Any], entry: dict[str, Any]) -> float:
    return embeddings_per_s(document, entry, "engine_s") / embeddings_per_s(document, entry, "baseline_s")


def summary_lines(document: dict[str, Any]) -> list[str]:
    lines = []
    for entry in document["lengths"]:
        line = (f"{entry['input_len']:>5} tokens: the engine embeds "
                f"{embeddings_per_s(document, entry, 'engine_s'):,.1f}/s")
        if entry["baseline_s"] is not None:
            line += (f", transformers {embeddings_per_s(document, entry, 'baseline_s'):,.1f}/s "
                     f"({speedup(document, entry):.2f}x); least cosine between them {entry['min_cosine']:.6f}")
        lines.append(line)
    return lines


def report_embed(args: argparse.Namespace, run: EmbedRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    settings["engine"] = run.engine_settings
    document = {"settings": settings, "machine": machine_info(), "model": run.model,
                "lengths": [vars(entry) for entry in run.lengths]}
    print_and_write(summary_lines(document), document, args.output_json)
    return document
