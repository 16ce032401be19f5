"""How an A/B comparison reads, the same in the terminal and in the documents: the revisions,
then one row per headline metric with both medians, their ratio and the verdict."""
from __future__ import annotations

from typing import Any

from autoglm.bench.ab.checkouts import Revision
from autoglm.bench.ab.metrics import AFTER, BEFORE, SIDES, Comparison
from autoglm.bench.results.formats import ratio

PASS, FAIL = "pass", "FAIL"


def revisions_line(document: dict[str, Any]) -> str:
    """``before: main~3 (1a2b3c4d5e: subject); after: ...; median of 2 rounds each``."""
    sides = "; ".join(f"{side}: {Revision(**document['revisions'][side]).describe()}" for side in SIDES)
    return f"{sides}; median of {len(document['rounds'])} rounds each"


def summary_header(document: dict[str, Any]) -> list[str]:
    commits = {side: document["revisions"][side]["commit"][:10] for side in SIDES}
    return ["metric", f"{BEFORE} ({commits[BEFORE]})", f"{AFTER} ({commits[AFTER]})", f"{AFTER} / {BEFORE}",
            f"at least {document['min_ratio']:.2f}x as good"]


def summary_rows(comparisons: list[Comparison], min_ratio: float) -> list[list[str]]:
    return [[comparison.metric.name, comparison.metric.written_as(comparison.before),
             comparison.metric.written_as(comparison.after), ratio(comparison.ratio),
             PASS if comparison.passes(min_ratio) else FAIL] for comparison in comparisons]
