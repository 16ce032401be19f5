"""The table of a ``bench images`` results file: a screenshot's time to first token on each side, what a
prefix-cache hit saves, and the vision encoder's throughput one image a call and batched."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.images import report
from autoglm.bench.results.formats import markdown_table
from autoglm.bench.results.results_files import ResultsFile


def images(results: ResultsFile) -> str:
    dtypes = ", ".join(f"{side} in {dtype}" for side, dtype in results.data["dtypes"].items())
    return (caption(results) + markdown_table(report.HEADER, report.table_rows(results.data))
            + f"\n\nComputed with {dtypes}.")
