"""The headline metrics of each benchmark, their medians over rounds, and the verdicts.

Every number is computed from a round's results as the benchmark wrote them, by the same
functions the documents' figures use.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median
from typing import Any

from autoglm.bench.results import quantities as q
from autoglm.bench.results.formats import duration, rate
from autoglm.bench.results.results_files import ResultsFile

BEFORE, AFTER = "before", "after"
SIDES = (BEFORE, AFTER)


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool  # rates; for times lower is better
    written_as: Callable[[float], str]


def _rate(name: str) -> Metric:
    return Metric(name, higher_is_better=True, written_as=rate)


def _time(name: str) -> Metric:
    return Metric(name, higher_is_better=False, written_as=duration)


def throughput_metrics(results: ResultsFile) -> list[tuple[Metric, float]]:
    """The engine's output and total tokens/s, per workload."""
    metrics = []
    for workload in results.at("workloads"):
        engine = q.throughput_side(results, workload, q.ENGINE)
        metrics += [(_rate(f"{workload}: output tok/s"), q.output_rate(engine)),
                    (_rate(f"{workload}: total tok/s"), q.total_rate(engine))]
    return metrics


def latency_metrics(results: ResultsFile) -> list[tuple[Metric, float]]:
    """The engine's mean time to first token and decode tokens/s, per prompt length."""
    metrics = []
    for input_len in results.at("input_lens"):
        engine = q.latency_side(results, input_len, q.ENGINE)
        if engine is None:
            raise ValueError(f"{results.name} has no engine side at {input_len} prompt tokens")
        metrics += [(_time(f"{input_len} prompt tokens: TTFT"), engine["mean_ttft_s"]),
                    (_rate(f"{input_len} prompt tokens: decode tok/s"), engine["decode_tokens_per_s"])]
    return metrics


def serve_metrics(results: ResultsFile) -> list[tuple[Metric, float]]:
    """The server's mean and median time to first token and its output tokens/s, per request rate."""
    metrics = []
    for run in results.at("runs"):
        rate, measured = run["request_rate"], run["metrics"]
        if measured["failed"]:
            raise ValueError(f"{results.name}: {measured['failed']} requests failed at request rate {rate}")
        metrics += [(_time(f"rate {rate}: mean TTFT"), measured["ttft"]["mean_ms"] / 1000),
                    (_time(f"rate {rate}: median TTFT"), measured["ttft"]["median_ms"] / 1000),
                    (_rate(f"rate {rate}: output tok/s"), measured["output_throughput"])]
    return metrics


# The benchmarks an A/B comparison can run, and what it compares of each.
HEADLINES: dict[str, Callable[[ResultsFile], list[tuple[Metric, float]]]] = {
    "throughput": throughput_metrics,
    "latency": latency_metrics,
    "serve": serve_metrics,
}


@dataclass(frozen=True)
class Comparison:
    """One metric's median over the rounds on each side."""

    metric: Metric
    before: float
    after: float

    @property
    def ratio(self) -> float:
        return self.after / self.before

    def passes(self, min_ratio: float) -> bool:
        """Whether after is at least ``min_ratio`` as good as before: as fast, or at most 1/min_ratio as long."""
        return self.ratio >= min_ratio if self.metric.higher_is_better else self.ratio <= 1 / min_ratio


def _medians(document: dict[str, Any], side: str) -> dict[Metric, float]:
    """Each headline metric's median over the rounds of one side, in the benchmark's order."""
    headline = HEADLINES[document["benchmark"]]
    rounds = document["rounds"]
    values: dict[Metric, list[float]] = {}
    for number, results in enumerate(rounds, start=1):
        for metric, value in headline(ResultsFile(f"round {number}, {side}", results[side])):
            values.setdefault(metric, []).append(value)
    for metric, measured in values.items():
        if len(measured) != len(rounds):
            raise ValueError(f"{side} measured {metric.name!r} in {len(measured)} of {len(rounds)} rounds")
    return {metric: median(measured) for metric, measured in values.items()}


def compare(document: dict[str, Any]) -> list[Comparison]:
    """Every headline metric of an ``autoglm bench ab`` results file, before against after."""
    before, after = (_medians(document, side) for side in SIDES)
    if before.keys() != after.keys():
        names = {side: ", ".join(metric.name for metric in medians) for side, medians in zip(SIDES, (before, after))}
        raise ValueError(f"the sides measured different things: before {names[BEFORE]}; after {names[AFTER]}")
    return [Comparison(metric, value, after[metric]) for metric, value in before.items()]
