"""How a soak is shown: a few lines of text, and the JSON document ``--output-json`` writes."""
from __future__ import annotations

import argparse
from typing import Any

from autoglm.bench.lib.serve_metrics import LatencyStats
from autoglm.bench.results.report import is_local_server, machine_info, print_and_write
from autoglm.bench.soak.measure import PhaseResult, SoakRun

# The goals the issue set: victims' p99 gap within 3x with the hostile load, memory within 5%.
ITL_RATIO_TARGET = 3.0
RSS_GROWTH_TARGET = 0.05
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = (
    "victims", "output_len", "phase_s", "big_prompt_interval_s", "disconnect_interval_s", "seed", "serve_args")


def phase_document(phase: PhaseResult) -> dict[str, Any]:
    return {
        "duration_s": phase.duration_s,
        "victim_requests": len(phase.victims),
        "itl": LatencyStats.of(phase.itls_s).__dict__,
        "statuses": dict(sorted(phase.statuses.items())),
    }


def p99_itl_ratio(document: dict[str, Any]) -> float:
    """The victims' p99 inter-token gap with the hostile load over without it."""
    return document["hostile"]["itl"]["p99_ms"] / document["baseline"]["itl"]["p99_ms"]


def rss_growth(document: dict[str, Any]) -> float | None:
    """The server's resident memory after the hostile phase over before it, less one; None when unmeasured."""
    rss = document["server_rss_bytes"]
    return None if rss["before"] is None else rss["after"] / rss["before"] - 1


def requests_sent(document: dict[str, Any]) -> int:
    return sum(sum(document[phase]["statuses"].values()) for phase in ("baseline", "hostile"))


def soak_document(settings: dict[str, Any], baseline: PhaseResult, hostile: PhaseResult,
                  rss_before: int | None, rss_after: int | None) -> dict[str, Any]:
    return {
        "settings": settings,
        "machine": machine_info() if is_local_server(settings["base_url"]) else None,
        "baseline": phase_document(baseline),
        "hostile": phase_document(hostile),
        "server_rss_bytes": {"before": rss_before, "after": rss_after},
    }


def summary_lines(document: dict[str, Any]) -> list[str]:
    lines = []
    for phase in ("baseline", "hostile"):
        itl, statuses = document[phase]["itl"], document[phase]["statuses"]
        counts = ", ".join(f"{name}: {count}" for name, count in statuses.items())
        lines.append(f"{phase}: victim ITL median {itl['median_ms']:.1f} ms, p99 {itl['p99_ms']:.1f} ms; {counts}")
    ratio = p99_itl_ratio(document)
    lines.append(f"requests sent: {requests_sent(document)}")
    lines.append(f"p99 ITL with / without the hostile load: {ratio:.2f}x (target: within {ITL_RATIO_TARGET:g}x)")
    growth = rss_growth(document)
    if growth is not None:
        rss = document["server_rss_bytes"]
        lines.append(f"server resident memory: {rss['before'] / 2**20:.0f} MiB before, {rss['after'] / 2**20:.0f} MiB "
                     f"after, {growth:+.1%} (target: within {RSS_GROWTH_TARGET:.0%})")
    return lines


def victims_failed(document: dict[str, Any]) -> bool:
    return any(document[phase]["statuses"].get("victim failed") for phase in ("baseline", "hostile"))


def report_soak(args: argparse.Namespace, run: SoakRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    settings.update(base_url=run.base_url, model=run.model, server_model_folder=args.model,
                    big_prompt_chars=list(args.big_prompt_chars))
    document = soak_document(settings, run.baseline, run.hostile, run.rss_before, run.rss_after)
    print_and_write(summary_lines(document), document, args.output_json)
    return document
