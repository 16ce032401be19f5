"""What ``bench pp`` found, computed from its results file: each engine's rates, and the pipeline's over one
process's."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from autoglm.bench.results.report import machine_info, print_and_write

if TYPE_CHECKING:
    from autoglm.bench.pipeline.measure import PipelineRun

# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = ("stages", "num_prompts", "input_len", "output_len", "rounds")


def throughput_ratio(document: dict[str, Any]) -> float:
    """The pipeline's total tokens/s over one process's (below 1: a loss)."""
    alone, staged = document["sides"]
    return staged["total_tokens_per_s"] / alone["total_tokens_per_s"]


def summary_lines(document: dict[str, Any]) -> list[str]:
    lines = [f"{side['num_stages']} stage(s), {side['torch_threads']} torch thread(s) a process: "
             f"{side['output_tokens_per_s']:,.1f} output tok/s, {side['total_tokens_per_s']:,.1f} total tok/s "
             f"(quickest of rounds of {', '.join(f'{seconds:.1f}' for seconds in side['rounds_s'])} s)"
             for side in document["sides"]]
    same = "the same greedy tokens" if document["same_tokens"] else "DIFFERENT tokens"
    return [*lines, f"the pipeline runs at {throughput_ratio(document):.2f}x one process's rate, with {same}"]


def report_pipeline(args: argparse.Namespace, run: PipelineRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    settings["engine"] = run.engine_settings
    document = {"settings": settings, "machine": machine_info(), "sides": [side.to_dict() for side in run.sides],
                "same_tokens": run.same_tokens}
    print_and_write(summary_lines(document), document, args.output_json)
    return document
