"""What a swap run measured: per switch, how long the admin call took and how soon the version it switched
to served a first token; per request, whether it failed, changed version midway or went to the wrong one.
The results document, the figures the docs quote, and the lines printed."""
from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from autoglm.bench.lib.request_result import RequestResult
from autoglm.bench.results.report import machine_info, print_and_write
from autoglm.bench.swap.measure import SwapRun, Switch

OPERATIONS = ("promote", "rollback")
SWITCH_TIMES = ("call_s", "call_to_first_token_s", "answer_to_first_token_s")
ERRORS_KEPT = 5
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = ("serve_args", "streams", "output_len", "rounds", "settle_s", "seed")


def first_target_token(requests: Sequence[RequestResult], switch: Switch) -> float | None:
    """When a request sent since the switch's call began first got a token from the switch's target."""
    times = [request.chunk_times[0] for request in requests
             if request.send_time >= switch.called_at and request.chunk_times
             and request.served_by[:1] == [switch.target]]
    return min(times, default=None)


def in_flight_across(requests: Sequence[RequestResult], switch: Switch) -> int:
    """Requests sent before the call that ended after its answer: those the switch must not drop."""
    return sum(1 for request in requests if request.send_time < switch.called_at
               and (request.end_time is None or request.end_time > switch.answered_at))


def switch_document(requests: Sequence[RequestResult], switch: Switch) -> dict[str, Any]:
    first_token = first_target_token(requests, switch)
    return {
        "round": switch.round,
        "operation": switch.operation,
        "target": switch.target,
        "in_flight_across": in_flight_across(requests, switch),
        "call_s": switch.answered_at - switch.called_at,
        "call_to_first_token_s": None if first_token is None else first_token - switch.called_at,
        "answer_to_first_token_s": None if first_token is None else first_token - switch.answered_at,
    }


def misrouted(requests: Sequence[RequestResult], switches: Sequence[Switch]) -> int:
    """Requests sent after a switch answered (and before the next began) that another version served."""
    count = 0
    for switch, following in zip(switches, [*switches[1:], None]):
        window_end = following.called_at if following is not None else float("inf")
        count += sum(1 for request in requests if switch.answered_at <= request.send_time < window_end
                     and request.served_by and request.served_by[0] != switch.target)
    return count


def request_counts(run: SwapRun) -> dict[str, Any]:
    started_on = Counter(request.served_by[0] for request in run.requests if request.served_by)
    return {
        "sent": len(run.requests),
        "failed": sum(1 for request in run.requests if not request.success),
        "changed_version": sum(1 for request in run.requests if len(request.served_by) > 1),
        "misrouted": misrouted(run.requests, run.switches),
        "by_version": dict(sorted(started_on.items())),
    }


def spread(values: Sequence[float | None]) -> dict[str, float | None]:
    """Median and max of the measured values; a switch whose target served nothing counts as unmeasured."""
    measured = [value for value in values if value is not None]
    return {"median": statistics.median(measured) if measured else None, "max": max(measured, default=None),
            "unmeasured": len(values) - len(measured)}


def summary(switches: Sequence[dict[str, Any]], standby_loads_s: Sequence[float]) -> dict[str, Any]:
    """Each operation's times, and what loading version 2 cold took: what a rollback to an unloaded version
    would wait for."""
    times: dict[str, Any] = {
        operation: {name: spread([switch[name] for switch in switches if switch["operation"] == operation])
                    for name in SWITCH_TIMES}
        for operation in OPERATIONS}
    return {**times, "standby_load_s": spread(standby_loads_s)}


def swap_document(settings: dict[str, Any], machine: dict[str, Any] | None, run: SwapRun) -> dict[str, Any]:
    switches = [switch_document(run.requests, switch) for switch in run.switches]
    return {
        "settings": settings,
        "machine": machine,
        "summary": summary(switches, run.standby_loads_s),
        "requests": request_counts(run),
        "switches": switches,
        "standby_loads_s": run.standby_loads_s,
        "errors": [request.error for request in run.requests if request.error is not None][:ERRORS_KEPT],
    }


def problems(document: dict[str, Any]) -> int:
    """Requests that failed, changed version or went to the wrong one, and switches whose target served nothing."""
    counts = document["requests"]
    unmeasured = sum(document["summary"][operation]["call_to_first_token_s"]["unmeasured"]
                     for operation in OPERATIONS)
    return counts["failed"] + counts["changed_version"] + counts["misrouted"] + unmeasured


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f} ms"


def summary_lines(document: dict[str, Any]) -> list[str]:
    figures, counts = document["summary"], document["requests"]
    promote, rollback = figures["promote"], figures["rollback"]
    return [
        f"promote: the call {_ms(promote['call_s']['median'])} median (max {_ms(promote['call_s']['max'])}); from "
        f"its answer to version 2's first token {_ms(promote['answer_to_first_token_s']['median'])} "
        f"(max {_ms(promote['answer_to_first_token_s']['max'])})",
        f"rollback: the call {_ms(rollback['call_s']['median'])} median (max {_ms(rollback['call_s']['max'])}); "
        f"from the call to the warm version 1's first token {_ms(rollback['call_to_first_token_s']['median'])} "
        f"(max {_ms(rollback['call_to_first_token_s']['max'])})",
        f"requests: {counts['sent']} sent, {counts['failed']} failed, {counts['changed_version']} changed version "
        f"midway, {counts['misrouted']} sent after a switch not served by its target",
        f"loading version 2 again between rounds: {_ms(figures['standby_load_s']['median'])} median "
        f"(max {_ms(figures['standby_load_s']['max'])})",
    ]


def report_swap(args: argparse.Namespace, run: SwapRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    settings.update(model=str(args.model), model_b=None if args.model_b is None else str(args.model_b))
    document = swap_document(settings, machine_info(), run)
    print_and_write(summary_lines(document), document, args.output_json)
    return document
