"""What ``bench batch`` found, computed from its results file: interactive requests' time to first token
beside a batch against alone, and the batch's own pace."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from autoglm.bench.results.report import machine_info, print_and_write

if TYPE_CHECKING:
    from autoglm.bench.batch.measure import BatchRun

# The goal: while a batch runs, interactive requests' median TTFT stays within 1.5x of their TTFT alone.
TTFT_RATIO_TARGET = 1.5
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = ("serve_args", "batch_lines", "interactive_requests", "input_len", "output_len", "seed")


def ttft_ms(document: dict[str, Any], phase: str, statistic: str) -> float:
    """``median_ms`` or ``p90_ms`` of one phase's time to first token; an error when no request measured it."""
    value = document[phase]["metrics"]["ttft"][statistic]
    if value is None:
        raise ValueError(f"no {phase} request got a first token; errors: {'; '.join(document[phase]['errors']) or 'none'}")
    return value


def ttft_ratio(document: dict[str, Any]) -> float:
    """Interactive median TTFT beside the batch over alone."""
    return ttft_ms(document, "beside_batch", "median_ms") / ttft_ms(document, "alone", "median_ms")


def within_target(document: dict[str, Any]) -> bool:
    return ttft_ratio(document) <= TTFT_RATIO_TARGET


def failures(document: dict[str, Any]) -> list[str]:
    """What went wrong: failed requests, failed lines, and interactive requests that ended after the batch."""
    found = [f"{phase} request failed: {error}" for phase in ("alone", "beside_batch")
             for error in document[phase]["errors"]]
    batch = document["batch"]
    if batch["status"] != "completed" or batch["failed"]:
        found.append(f"batch {batch['status']}, {batch['failed']} of {batch['lines']} lines failed: "
                     f"{'; '.join(batch['errors']) or 'no error file'}")
    return found


def ttft_line(document: dict[str, Any]) -> str:
    try:
        ratio = ttft_ratio(document)
        alone_p90, beside_p90 = (ttft_ms(document, phase, "p90_ms") for phase in ("alone", "beside_batch"))
    except ValueError as error:
        return f"interactive TTFT: {error}"
    verdict = "within" if ratio <= TTFT_RATIO_TARGET else "beyond"
    return (f"interactive TTFT, {document['settings']['interactive_requests']} requests one at a time: median "
            f"{ttft_ms(document, 'alone', 'median_ms'):,.1f} ms alone, "
            f"{ttft_ms(document, 'beside_batch', 'median_ms'):,.1f} ms beside the batch ({ratio:.2f}x, {verdict} "
            f"the {TTFT_RATIO_TARGET:g}x target); p90 {alone_p90:,.1f} ms and {beside_p90:,.1f} ms")


def summary_lines(document: dict[str, Any]) -> list[str]:
    settings, batch, beside = document["settings"], document["batch"], document["beside_batch"]
    lines = [ttft_line(document),
             f"batch: {batch['completed']} of {batch['lines']} lines in {batch['duration_s']:,.1f} s "
             f"({batch['lines_per_s']:,.2f} lines/s), status {batch['status']}"]
    if beside["during_batch"] < settings["interactive_requests"]:
        lines.append(f"only {beside['during_batch']} of {settings['interactive_requests']} interactive requests "
                     "ended while the batch ran; give it more lines (--batch-lines)")
    return lines + failures(document)


def report_batch(args: argparse.Namespace, run: BatchRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    recorded = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    recorded.update(model=run.model, server_model_folder=args.model)
    document = {"settings": recorded, "machine": machine_info(), "alone": run.alone,
                "beside_batch": run.beside_batch, "batch": run.batch}
    print_and_write(summary_lines(document), document, args.output_json)
    return document
