"""The table of a ``bench batch`` results file: interactive time to first token alone and beside a batch."""
from __future__ import annotations

from autoglm.bench.batch import report
from autoglm.bench.figures.tables import caption
from autoglm.bench.results.formats import bold, duration, markdown_table
from autoglm.bench.results.results_files import ResultsFile


def batch(results: ResultsFile) -> str:
    document = results.data
    settings, lines = document["settings"], document["batch"]

    def ttft(phase: str) -> list[str]:
        return [duration(report.ttft_ms(document, phase, statistic) / 1e3) for statistic in ("median_ms", "p90_ms")]

    verdict = "within" if report.within_target(document) else "beyond"
    rows = [
        [f"{settings['interactive_requests']} interactive chat requests, one at a time, alone", *ttft("alone"), ""],
        [f"the same beside a batch of {lines['lines']} lines", *ttft("beside_batch"),
         f"{bold(f'{report.ttft_ratio(document):.2f}x')} ({verdict} {report.TTFT_RATIO_TARGET:g}x)"],
    ]
    pace = (f"The batch ({settings['input_len']} prompt and {settings['output_len']} output tokens a line) ended "
            f"{lines['status']} in {duration(lines['duration_s'])}: {lines['completed']} lines done, "
            f"{lines['lines_per_s']:,.2f} lines/s.")
    table = markdown_table(["interactive requests", "median TTFT", "p90 TTFT", "median beside / alone"], rows)
    return caption(results) + table + "\n\n" + pace
