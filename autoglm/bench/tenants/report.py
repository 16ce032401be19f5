"""What ``bench tenants`` found, computed from its results file: the throughput tenants cost, the token
split between backlogged tenants, and how long the victim of a flood waited for its first token."""
from __future__ import annotations

import argparse
import math
import statistics
from typing import TYPE_CHECKING, Any

from autoglm.bench.lib.tenant_metrics import backlogged_shares, weight_shares
from autoglm.bench.results.report import machine_info, print_and_write
from autoglm.bench.tenants.tenants_file import FLOODER, VICTIM

if TYPE_CHECKING:
    from autoglm.bench.tenants.measure import TenantsRun

# The goals: tenants cost under 2% of a saturated server's throughput; backlogged tenants
# split the served tokens as their weights within 10%.
OVERHEAD_TARGET = 0.02
SPLIT_TOLERANCE = 0.10
# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = (
    "serve_args", "max_num_seqs", "input_len", "output_len", "overhead_prompts", "rounds", "backlog_prompts",
    "flood_prompts", "victim_prompts", "victim_rate", "victim_delay_s", "seed")


def median_throughput(phases: list[dict[str, Any]]) -> float:
    """Median output tokens/s over the rounds of one server."""
    return statistics.median(phase["metrics"]["output_throughput"] for phase in phases)


def overhead(document: dict[str, Any]) -> float:
    """The throughput lost to keys and limits: 1 - with tenants / without, medians of the rounds."""
    rounds = document["overhead"]
    return 1 - median_throughput(rounds["keyed"]) / median_throughput(rounds["open"])


def tenant_entry(phase: dict[str, Any], name: str) -> dict[str, Any]:
    entry = next((tenant for tenant in phase["tenants"] if tenant["name"] == name), None)
    if entry is None:
        raise ValueError(f"no tenant {name!r} in the phase; tenants: "
                         f"{', '.join(tenant['name'] for tenant in phase['tenants'])}")
    return entry


def served_split(document: dict[str, Any]) -> float:
    """The flooder's tokens over the victim's while both were backlogged, in the fairness phase;
    infinite when the victim got none (a first-come first-served scheduler)."""
    shares = backlogged_shares(document["fairness"]["tenants"])
    if shares is None:
        raise ValueError("the fairness phase never had both tenants backlogged while tokens were served; "
                         "send more requests (--backlog-prompts) or lower the servers' --max-num-seqs")
    return math.inf if shares[VICTIM] == 0 else shares[FLOODER] / shares[VICTIM]


def weight_split(document: dict[str, Any]) -> float:
    shares = weight_shares(document["fairness"]["tenants"])
    return shares[FLOODER] / shares[VICTIM]


def flood_ttft_ratio(document: dict[str, Any]) -> float:
    """The victim's median time to first token beside the flood over its median alone."""
    flood = document["flood"]
    alone = tenant_entry(flood["alone"], VICTIM)["metrics"]["ttft"]["median_ms"]
    return tenant_entry(flood["flooded"], VICTIM)["metrics"]["ttft"]["median_ms"] / alone


def summary_lines(document: dict[str, Any]) -> list[str]:
    rounds = document["overhead"]
    open_rate, keyed_rate = median_throughput(rounds["open"]), median_throughput(rounds["keyed"])
    lines = [f"saturated throughput: {open_rate:,.1f} output tok/s without tenants, {keyed_rate:,.1f} with keys "
             f"and limits: {overhead(document):+.2%} lost (target: under {OVERHEAD_TARGET:.0%})"]
    try:
        lines.append(f"both backlogged ({document['fairness']['backlogged_s']:.1f} s): tokens served {FLOODER}:"
                     f"{VICTIM} = {served_split(document):.2f}:1, weights {weight_split(document):.2f}:1 "
                     f"(target: within {SPLIT_TOLERANCE:.0%})")
    except ValueError as error:
        lines.append(f"fairness: {error}")
    flood = document["flood"]
    alone, flooded = (tenant_entry(flood[phase], VICTIM)["metrics"]["ttft"]["median_ms"]
                      for phase in ("alone", "flooded"))
    lines.append(f"{VICTIM}'s median TTFT: {alone:,.0f} ms alone, {flooded:,.0f} ms beside {FLOODER}'s flood "
                 f"({flood_ttft_ratio(document):.2f}x)")
    errors = sorted({error for phase in _phases(document) for error in phase["errors"]})
    if errors:
        lines.append(f"failed requests: {'; '.join(errors[:3])}")
    return lines


def _phases(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [*document["overhead"]["open"], *document["overhead"]["keyed"], document["fairness"],
            document["flood"]["alone"], document["flood"]["flooded"]]


def failed_requests(document: dict[str, Any]) -> int:
    return sum(phase["metrics"]["failed"] for phase in _phases(document))


def report_tenants(args: argparse.Namespace, run: TenantsRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    recorded = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    recorded.update(model=run.model, server_model_folder=args.model, weights=run.weights)
    document = {"settings": recorded, "machine": machine_info(),
                "overhead": {"open": run.open_rounds, "keyed": run.keyed_rounds}, "fairness": run.fairness,
                "flood": {"alone": run.alone, "flooded": run.flooded}}
    print_and_write(summary_lines(document), document, args.output_json)
    return document
