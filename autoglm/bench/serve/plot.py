"""PNG charts of a run: latency CDFs, and with several request rates, how throughput and latency move with the rate.

Figures are drawn on matplotlib's Agg canvas directly, without pyplot, so plotting needs no
display and leaves no global state behind.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from autoglm.bench.lib.rate_runner import RateRun, rate_label
from autoglm.bench.lib.serve_metrics import LatencyStats, ServeMetrics

CDF_FILE, SWEEP_FILE = "latency_cdf.png", "rate_sweep.png"
LATENCIES = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E latency", "e2el"))
PERCENTILES = (("median", "median_ms"), ("p90", "p90_ms"), ("p99", "p99_ms"))
DPI = 100


def plot_paths(target: str) -> tuple[Path, Path]:
    """The CDF and sweep files for ``--plot``: inside ``target`` when it is a folder (an existing one, or
    one written with a trailing slash), else next to it with its name as prefix (``run1_latency_cdf.png``)."""
    path = Path(target)
    if target.endswith(("/", "\\")) or path.is_dir():
        folder, prefix = path, ""
    else:
        folder, prefix = path.parent, (path.stem if path.suffix == ".png" else path.name) + "_"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{prefix}{CDF_FILE}", folder / f"{prefix}{SWEEP_FILE}"


def write_plots(target: str, runs: Sequence[tuple[RateRun, ServeMetrics]]) -> list[Path]:
    """The latency CDFs always; the rate sweep when more than one rate ran. Returns the files written."""
    cdf_path, sweep_path = plot_paths(target)
    _save(latency_cdfs([run for run, _ in runs]), cdf_path)
    written = [cdf_path]
    if len(runs) > 1:
        _save(rate_sweep(runs), sweep_path)
        written.append(sweep_path)
    return written


def _save(figure: Figure, path: Path) -> None:
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=DPI)


def latency_cdfs(runs: Sequence[RateRun]) -> Figure:
    """TTFT, TPOT, ITL and E2E latency of successful requests as cumulative distributions, one line per rate."""
    figure = Figure(figsize=(12, 8), layout="constrained")
    panels = figure.subplots(2, 2).flatten()
    for axes, (title, _) in zip(panels, LATENCIES):
        axes.set(title=title, xlabel="ms", ylabel="fraction of requests" if title != "ITL" else "fraction of gaps")
        axes.grid(alpha=0.3)
    for run in runs:
        done = [result for result in run.results if result.success]
        samples = (
            [result.ttft_s for result in done],
            [result.tpot_s for result in done],
            [gap for result in done for gap in result.itls_s],
            [result.e2el_s for result in done],
        )
        label = f"rate {rate_label(run.request_rate)}"
        for axes, seconds in zip(panels, samples):
            _cdf(axes, [value * 1000 for value in seconds if value is not None], label)
    for axes in panels:
        if axes.lines:
            axes.legend()
    return figure


def _cdf(axes: Axes, values: list[float], label: str) -> None:
    if values:
        ordered = sorted(values)
        fractions = [(index + 1) / len(ordered) for index in range(len(ordered))]
        axes.step(ordered, fractions, where="post", label=label)


def rate_sweep(runs: Sequence[tuple[RateRun, ServeMetrics]]) -> Figure:
    """Throughput and latency percentiles against the request rate; rates sit evenly spaced, so ``inf`` fits."""
    labels = [rate_label(run.request_rate) for run, _ in runs]
    metrics = [measured for _, measured in runs]
    positions = list(range(len(runs)))
    figure = Figure(figsize=(15, 8), layout="constrained")
    panels = figure.subplots(2, 3).flatten()

    def series_panel(axes: Axes, title: str, series: dict[str, list[float | None]]) -> None:
        for name, values in series.items():
            axes.plot(positions, [math.nan if value is None else value for value in values], marker="o", label=name)
        axes.set(title=title)

    series_panel(panels[0], "Requests per second", {
        "completed": [m.request_throughput for m in metrics],
        **({"goodput": [m.goodput for m in metrics]} if any(m.goodput is not None for m in metrics) else {}),
    })
    series_panel(panels[1], "Tokens per second", {
        "output": [m.output_throughput for m in metrics],
        "total": [m.total_token_throughput for m in metrics],
    })
    for axes, (title, name) in zip(panels[2:], LATENCIES):
        stats: list[LatencyStats] = [getattr(m, name) for m in metrics]
        series_panel(axes, f"{title} (ms)", {
            label: [getattr(s, field) for s in stats] for label, field in PERCENTILES
        })
    for axes in panels:
        axes.set_xticks(positions, labels)
        axes.set_xlabel("request rate (req/s)")
        axes.grid(alpha=0.3)
        axes.legend()
    return figure
