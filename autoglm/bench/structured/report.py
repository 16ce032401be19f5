"""What ``bench structured`` found, computed from its results file: the unconstrained requests' decode
speed beside unconstrained and beside constrained neighbours, and the step time the constraints added
against what the mask costs when timed alone."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from autoglm.bench.results.report import machine_info, print_and_write

if TYPE_CHECKING:
    from autoglm.bench.structured.measure import StructuredRun

# Options copied as they are into the settings of --output-json.
RECORDED_OPTIONS = ("num_unconstrained", "num_neighbours", "input_len", "output_len", "rounds")


def step_s(document: dict[str, Any], constrained: bool) -> float:
    """Seconds of a step decoding every request in the quickest round of one kind: on a shared machine
    the round others disturbed least (a round's own steps are alike, so the best round is no outlier)."""
    return min(entry["full_steps_s"] / entry["full_steps"] for entry in document["rounds"]
                             if entry["constrained"] == constrained)


def unconstrained_rate(document: dict[str, Any], constrained: bool) -> float:
    """The unconstrained requests' decode tokens/s beside neighbours of one kind."""
    return document["settings"]["num_unconstrained"] / step_s(document, constrained)


def rate_ratio(document: dict[str, Any]) -> float:
    """Their tokens/s beside constrained neighbours over beside unconstrained ones."""
    return unconstrained_rate(document, True) / unconstrained_rate(document, False)


def added_step_s(document: dict[str, Any]) -> float:
    """What constrained neighbours added to a step (negative: within the machine's noise, it got faster)."""
    return step_s(document, True) - step_s(document, False)


def summary_lines(document: dict[str, Any]) -> list[str]:
    settings, mask, compiled = document["settings"], document["mask_cost"], document["compile"]
    beside = f"{settings['num_neighbours']} neighbours"
    return [
        f"{settings['num_unconstrained']} unconstrained requests decode at {unconstrained_rate(document, False):,.1f} "
        f"tok/s beside {beside} unconstrained, {unconstrained_rate(document, True):,.1f} tok/s beside them "
        f"constrained ({rate_ratio(document):.3f}x)",
        f"a step took {added_step_s(document) * 1e3:+.2f} ms with the constraints, "
        f"{step_s(document, False) * 1e3:.1f} ms without; the mask costs {mask['total_s'] * 1e3:.2f} ms a step "
        f"(fill {mask['fill_s'] * 1e3:.3f} ms, apply {mask['apply_s'] * 1e3:.3f} ms)",
        *(f"compiling the {kind}: {cost['cold_s'] * 1e3:.1f} ms cold, {cost['cache_hit_s'] * 1e6:.1f} us from the "
          f"cache" for kind, cost in compiled.items()),
    ]


def report_structured(args: argparse.Namespace, run: StructuredRun) -> dict[str, Any]:
    """Print the summary and write ``--output-json``; the document both show."""
    settings = {name: getattr(args, name) for name in RECORDED_OPTIONS}
    settings["engine"] = run.engine_settings
    document = {"settings": settings, "machine": machine_info(),
                "rounds": [entry.to_dict(run.shape) for entry in run.rounds], "mask_cost": run.mask.to_dict(),
                "compile": {kind: vars(cost) for kind, cost in run.compiled.items()}}
    print_and_write(summary_lines(document), document, args.output_json)
    return document
