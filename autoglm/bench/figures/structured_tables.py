"""The table of a ``bench structured`` results file: unconstrained requests beside unconstrained and
constrained neighbours, the step time the constraints added, and what the mask costs timed alone."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.results.formats import bold, duration, markdown_table, rate
from autoglm.bench.results.results_files import ResultsFile
from autoglm.bench.structured import report


def _brief(seconds: float) -> str:
    """Microseconds below one millisecond (a fill, a cache hit), else as every figure writes a duration."""
    return f"{seconds * 1e6:.0f} us" if seconds < 1e-3 else duration(seconds)


def structured(results: ResultsFile) -> str:
    document = results.data
    settings, mask = document["settings"], document["mask_cost"]
    unconstrained, neighbours = settings["num_unconstrained"], settings["num_neighbours"]
    rows = [
        [f"{unconstrained} unconstrained requests' decode rate beside {neighbours} unconstrained neighbours "
         f"(quickest of {settings['rounds']} rounds)", rate(report.unconstrained_rate(document, False))],
        [f"the same beside {neighbours} constrained neighbours (JSON schema and regex)",
         f"{rate(report.unconstrained_rate(document, True))} ({bold(f'{report.rate_ratio(document):.3f}x')})"],
        [f"a step of all {unconstrained + neighbours}, unconstrained neighbours", duration(report.step_s(document, False))],
        ["what constrained neighbours added to it", f"{report.added_step_s(document) * 1e3:+.2f} ms"],
        [f"the mask timed alone: filling {mask['constrained_rows']} rows + applying to {mask['rows']} "
         f"(median of {mask['steps']} steps)", f"{bold(duration(mask['total_s']))} "
         f"({_brief(mask['fill_s'])} + {_brief(mask['apply_s'])})"],
        *([f"compiling the {kind}, cold / from the cache", f"{_brief(cost['cold_s'])} / {_brief(cost['cache_hit_s'])}"]
          for kind, cost in document["compile"].items()),
    ]
    return caption(results) + markdown_table(["measure", "figure"], rows)
