"""The prefix cache's counters, read from servers' Prometheus endpoints before and after a run.

A client sees latencies, not cache hits; the servers count prompt tokens looked up in and found
in their prefix caches. Behind a router every replica counts its own, so a run's hit rate sums
the counters of every endpoint given (a server's /metrics, or each Ray Serve replica's port).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from autoglm.bench.lib.errors import ServeBenchError

QUERIES = "autoglm:prefix_cache_queries_total"
HITS = "autoglm:prefix_cache_hits_total"
SCRAPE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PrefixCacheCounters:
    """Prompt tokens looked up in the prefix cache and found there, at one endpoint."""

    queries: float
    hits: float

    def __sub__(self, earlier: PrefixCacheCounters) -> PrefixCacheCounters:
        return PrefixCacheCounters(self.queries - earlier.queries, self.hits - earlier.hits)


def read_counters(url: str) -> PrefixCacheCounters:
    """The endpoint's counters, summed over its models."""
    try:
        response = httpx.get(url, timeout=SCRAPE_TIMEOUT_S)
        response.raise_for_status()
    except httpx.HTTPError as error:
        raise ServeBenchError(f"could not read the metrics at {url}: {error}") from None
    totals = {QUERIES: 0.0, HITS: 0.0}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in totals:
                totals[sample.name] += sample.value
    return PrefixCacheCounters(totals[QUERIES], totals[HITS])


def prefix_cache_report(urls: Sequence[str], before: Sequence[PrefixCacheCounters],
                        after: Sequence[PrefixCacheCounters]) -> dict[str, Any]:
    """What a run added at each endpoint, and the hit rate over them all (None if nothing was looked up)."""
    added = [later - earlier for earlier, later in zip(before, after)]
    queries, hits = sum(part.queries for part in added), sum(part.hits for part in added)
    return {
        "queries": queries, "hits": hits, "hit_rate": hits / queries if queries else None,
        "endpoints": [{"url": url, "queries": part.queries, "hits": part.hits} for url, part in zip(urls, added)],
    }
