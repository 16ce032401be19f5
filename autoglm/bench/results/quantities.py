"""Every number the documents quote that is not stored as such: computed from the raw results
each time (rates from token counts and seconds, ratios from the rates), never stored twice."""
from __future__ import annotations

from typing import Any

from autoglm.bench.results.results_files import ResultsFile
from autoglm.bench.results.roofline import MatmulRate, Roofline, WeightFormat

ENGINE = "autoglm"
ENGINE_WITHOUT_CACHE = "autoglm (no prefix cache)"
BASELINE = "transformers"


def roofline(file: ResultsFile) -> Roofline:
    value = Roofline.from_dict(file.data)
    if value.weights is None:
        raise ValueError(f"{file.name} was measured without --model, so it gives no bound for a model")
    return value


# ---- batch-1 latency ---------------------------------------------------------------------
def latency_side(latency: ResultsFile, input_len: str, side: str) -> dict[str, Any] | None:
    """One side's figures at one prompt length; None where that side did not run."""
    return latency.at(f"input_lens.{input_len}").get(side)


def _both_sides(latency: ResultsFile, input_len: str) -> tuple[dict[str, Any], dict[str, Any]]:
    engine, baseline = (latency_side(latency, input_len, side) for side in (ENGINE, BASELINE))
    if engine is None or baseline is None:
        raise ValueError(f"{latency.name} lacks a side at {input_len} tokens")
    return engine, baseline


def ttft_speedup(latency: ResultsFile, input_len: str) -> float:
    engine, baseline = _both_sides(latency, input_len)
    return baseline["mean_ttft_s"] / engine["mean_ttft_s"]


def decode_ratio(latency: ResultsFile, input_len: str) -> float:
    engine, baseline = _both_sides(latency, input_len)
    return engine["decode_tokens_per_s"] / baseline["decode_tokens_per_s"]


def gemv_bandwidth(bounds: ResultsFile, path: str, activation_dtype: str | None = None) -> float:
    """GB/s of weights a linear path streamed at one row in a ``bench roofline`` file."""
    paths = Roofline.from_dict(bounds.data).linear_paths
    rates = [rate for rate in (paths.rates if paths else []) if rate.m == 1 and rate.path == path
             and activation_dtype in (None, rate.activation_dtype)]
    if len(rates) != 1:
        raise ValueError(f"{bounds.name} has {len(rates)} one-row rates of path {path!r} "
                         f"{activation_dtype or ''}; name the activation dtype of one")
    return rates[0].weight_bytes_per_s / 1e9


def decode_bound_fraction(latency: ResultsFile, bounds: ResultsFile, input_len: str, side: str) -> float:
    """Decode rate over the bandwidth bound of the weights that side's decode reads."""
    result = latency_side(latency, input_len, side)
    if result is None:
        raise ValueError(f"{latency.name} has no {side} side at {input_len} tokens")
    limits = roofline(bounds)
    weight_format = WeightFormat(result["weight_dtype"], result.get("weight_group_size"),
                                 result.get("lm_head_weight_dtype"))
    return result["decode_tokens_per_s"] / limits.decode_bound(limits.weights, weight_format)


# ---- offline throughput ------------------------------------------------------------------
def throughput_side(throughput: ResultsFile, workload: str, side: str) -> dict[str, Any]:
    return throughput.at(f"workloads.{workload}.{side}")


def output_rate(result: dict[str, Any]) -> float:
    return result["output_tokens"] / result["elapsed_s"]


def total_rate(result: dict[str, Any]) -> float:
    return (result["prompt_tokens"] + result["output_tokens"]) / result["elapsed_s"]


def throughput_ratio(throughput: ResultsFile, workload: str, side: str = ENGINE) -> float:
    """Output tokens/s of an engine side over transformers'."""
    return output_rate(throughput_side(throughput, workload, side)) / output_rate(
        throughput_side(throughput, workload, BASELINE))


def compute_bound_fraction(throughput: ResultsFile, bounds: ResultsFile, workload: str, side: str = ENGINE) -> float:
    """Total tokens/s over the batched compute bound of the dtype the engine computed in."""
    result = throughput_side(throughput, workload, side)
    limits = roofline(bounds)
    return total_rate(result) / limits.compute_bound(limits.weights, result["compute_dtype"])


def prefix_cache_ttft_ratio(throughput: ResultsFile, workload: str) -> float:
    """Median TTFT without the prefix cache over with it."""
    return (throughput_side(throughput, workload, ENGINE_WITHOUT_CACHE)["median_ttft_s"]
            / throughput_side(throughput, workload, ENGINE)["median_ttft_s"])


def step_share(throughput: ResultsFile, workload: str, seconds_path: str) -> float:
    """A profiled phase's time (``phases_s.sample``, ``overhead_s``...) over all the steps' time."""
    profile_path = f"workloads.{workload}.{ENGINE}.profile"
    if throughput.at(profile_path) is None:
        raise ValueError(f"{throughput.name} has no profile of {workload}: it was run without --profile")
    return throughput.at(f"{profile_path}.{seconds_path}") / throughput.at(f"{profile_path}.step_s")


# ---- the machine's limits -------------------------------------------------------------------
def best_matmul(bounds: ResultsFile, dtype: str) -> MatmulRate:
    return Roofline.from_dict(bounds.data).best_matmul(dtype)


def matmul_ratio(bounds: ResultsFile, faster: str, slower: str) -> float:
    return best_matmul(bounds, faster).flops_per_s / best_matmul(bounds, slower).flops_per_s


# ---- serving -----------------------------------------------------------------------------
def serve_metrics(serve: ResultsFile) -> dict[str, Any]:
    """The aggregates of a file that measured one request rate."""
    runs = serve.at("runs")
    if len(runs) != 1:
        raise ValueError(f"{serve.name} measured {len(runs)} request rates; a figure quotes a file of one")
    return runs[0]["metrics"]


def itl_tail_ratio(serve: ResultsFile) -> float:
    """P99 inter-token latency over the median: how uneven the stream is."""
    itl = serve_metrics(serve)["itl"]
    return itl["p99_ms"] / itl["median_ms"]
