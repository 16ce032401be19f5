"""How ``autoglm bench serve`` shows a run: a table with one column per request rate, failure
notes, and the JSON document ``--output-json`` writes."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from autoglm.bench.lib.rate_runner import RateRun, rate_label
from autoglm.bench.lib.serve_metrics import LatencyStats, ServeMetrics
from autoglm.bench.lib.tenant_metrics import TenantResult, backlogged_shares, weight_shares
from autoglm.bench.results.report import format_table, is_local_server, machine_info

LATENCY_ROWS = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E latency", "e2el"))
# Distinct error messages a failure note quotes.
MAX_ERRORS_SHOWN = 3


def _number(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def metrics_table(title: str, columns: Sequence[tuple[str, ServeMetrics]],
                  extra_rows: Sequence[Sequence[str]] = ()) -> str:
    """One column of aggregates per labelled run (a rate, a tenant), ``extra_rows`` below them."""
    metrics = [measured for _, measured in columns]
    rows: list[list[str]] = []

    def row(name: str, values: Sequence[float | int | None]) -> None:
        rows.append([name, *map(_number, values)])

    row("Successful requests", [m.completed for m in metrics])
    row("Failed requests", [m.failed for m in metrics])
    row("Benchmark duration (s)", [m.duration_s for m in metrics])
    row("Total input tokens", [m.total_input_tokens for m in metrics])
    row("Total generated tokens", [m.total_output_tokens for m in metrics])
    row("Request throughput (req/s)", [m.request_throughput for m in metrics])
    row("Output token throughput (tok/s)", [m.output_throughput for m in metrics])
    row("Total token throughput (tok/s)", [m.total_token_throughput for m in metrics])
    if any(m.goodput is not None for m in metrics):
        row("Request goodput (req/s)", [m.goodput for m in metrics])
    for heading, name in LATENCY_ROWS:
        stats: list[LatencyStats] = [getattr(m, name) for m in metrics]
        row(f"Mean {heading} (ms)", [s.mean_ms for s in stats])
        row(f"Median {heading} (ms)", [s.median_ms for s in stats])
        row(f"P90 {heading} (ms)", [s.p90_ms for s in stats])
        row(f"P99 {heading} (ms)", [s.p99_ms for s in stats])
    rows += [list(extra) for extra in extra_rows]
    return format_table([title, *(label for label, _ in columns)], rows)


def summary_table(runs: Sequence[tuple[RateRun, ServeMetrics]]) -> str:
    return metrics_table("request rate (req/s)", [(rate_label(run.request_rate), measured) for run, measured in runs])


def tenants_table(tenants: Sequence[TenantResult], backlogged_s: float) -> str:
    """One column per tenant, with its rate, and its share of the tokens served while all were backlogged
    beside the share its weight entitles it to."""
    entries = [tenant.to_dict(rate_label(tenant.request_rate)) for tenant in tenants]
    shares = backlogged_shares(entries)
    rows = [
        ["Request rate (req/s)", *(entry["request_rate"] for entry in entries)],
        [f"Tokens while all backlogged ({backlogged_s:.2f} s)",
         *(f"{entry['backlogged_tokens']:.0f}" for entry in entries)],
        ["Share of those tokens", *(f"{shares[entry['name']]:.1%}" if shares else "n/a" for entry in entries)],
        ["Share by weight", *(f"{share:.1%}" for share in weight_shares(entries).values())],
    ]
    return metrics_table("tenant", [(tenant.name, tenant.metrics) for tenant in tenants], rows)


def failure_notes(runs: Sequence[RateRun]) -> list[str]:
    """One line per run with failures: how many, and the commonest reasons."""
    notes = []
    for run in runs:
        errors = Counter(result.error or "no answer" for result in run.results if not result.success)
        if errors:
            reasons = "; ".join(f"{message} (x{count})" for message, count in errors.most_common(MAX_ERRORS_SHOWN))
            notes.append(f"rate {rate_label(run.request_rate)}: {sum(errors.values())} of {len(run.results)} "
                         f"requests failed: {reasons}")
    return notes


def report_document(settings: dict[str, Any], runs: Sequence[tuple[RateRun, ServeMetrics]],
                    tenants_by_run: Sequence[tuple[Sequence[TenantResult], float]] | None = None,
                    prefix_caches: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Settings, the server's machine when it is this one (None otherwise), each rate's aggregates
    (with tenants, each tenant's and the seconds all were backlogged; with metrics URLs, the servers'
    prefix-cache counts) and every request's raw timings; rates as :func:`rate_label` strings, since
    JSON has no infinity."""
    documents = []
    for index, (run, measured) in enumerate(runs):
        document: dict[str, Any] = {"request_rate": rate_label(run.request_rate), "metrics": measured.to_dict()}
        if tenants_by_run is not None:
            tenants, backlogged_s = tenants_by_run[index]
            document["tenants"] = [tenant.to_dict(rate_label(tenant.request_rate)) for tenant in tenants]
            document["backlogged_s"] = backlogged_s
        if prefix_caches is not None:
            document["prefix_cache"] = prefix_caches[index]
        document["requests"] = [result.to_dict() for result in run.results]
        documents.append(document)
    return {
        "settings": settings,
        "machine": machine_info() if is_local_server(settings["base_url"]) else None,
        "runs": documents,
    }
