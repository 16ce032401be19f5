"""The table of a ``bench tenants`` results file: what keys and limits cost, and how the server shared itself."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.results.formats import bold, duration, markdown_table, rate
from autoglm.bench.results.results_files import ResultsFile
from autoglm.bench.tenants import report
from autoglm.bench.tenants.tenants_file import FLOODER, VICTIM


def tenants(results: ResultsFile) -> str:
    document = results.data
    settings, rounds, flood = document["settings"], document["overhead"], document["flood"]
    alone, flooded = (report.tenant_entry(flood[phase], VICTIM)["metrics"]["ttft"]["median_ms"]
                      for phase in ("alone", "flooded"))
    rows = [
        [f"saturated output throughput, no tenants ({settings['overhead_prompts']} requests at once, median of "
         f"{settings['rounds']})", rate(report.median_throughput(rounds["open"]))],
        ["the same with keys and limits", f"{rate(report.median_throughput(rounds['keyed']))} "
         f"({bold(f'{-report.overhead(document):+.1%}')})"],
        [f"tokens served {FLOODER}:{VICTIM} while both were backlogged "
         f"({document['fairness']['backlogged_s']:.1f} s)",
         f"{bold(f'{report.served_split(document):.2f}:1')} (weights {report.weight_split(document):.2f}:1)"],
        [f"{VICTIM}'s median TTFT, {settings['victim_prompts']} requests alone", duration(alone / 1e3)],
        [f"the same beside {FLOODER}'s flood of {settings['flood_prompts']}",
         f"{duration(flooded / 1e3)} ({bold(f'{report.flood_ttft_ratio(document):.2f}x')})"],
    ]
    return caption(results) + markdown_table(["measure", "figure"], rows)
