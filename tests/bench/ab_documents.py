"""Synthetic ``autoglm bench ab`` results files: raw rounds as each benchmark writes them."""
from __future__ import annotations

from typing import Any

MACHINE = {"cpu_model": "AMD EPYC", "cpu_count": 2, "accelerators": [], "torch_version": "2.13.0+cpu"}
REVISIONS = {
    "before": {"name": "main", "commit": "a" * 40, "subject": "the old engine", "uncommitted_changes": False},
    "after": {"name": "working tree", "commit": "b" * 40, "subject": "the new engine", "uncommitted_changes": True},
}


def throughput_round(elapsed_s: float, workloads: tuple[str, ...] = ("mixed",)) -> dict[str, Any]:
    """100 prompt and 50 output tokens per workload in ``elapsed_s``; the stored rates are stale on
    purpose, so a test sees whether rates are computed from the counts."""
    engine = {"prompt_tokens": 100, "output_tokens": 50, "elapsed_s": elapsed_s,
              "output_tokens_per_s": 1.0, "total_tokens_per_s": 1.0}
    return {"machine": MACHINE, "workloads": {name: {"autoglm": dict(engine)} for name in workloads}}


def latency_round(ttft_s: float, decode_tokens_per_s: float) -> dict[str, Any]:
    engine = {"mean_ttft_s": ttft_s, "decode_tokens_per_s": decode_tokens_per_s}
    return {"machine": MACHINE, "input_lens": {"128": {"autoglm": engine}}}


def serve_round(mean_ttft_ms: float, output_throughput: float, failed: int = 0) -> dict[str, Any]:
    metrics = {"completed": 2 - failed, "failed": failed, "output_throughput": output_throughput,
               "ttft": {"mean_ms": mean_ttft_ms, "median_ms": mean_ttft_ms / 2}}
    return {"machine": MACHINE, "runs": [{"request_rate": "inf", "metrics": metrics}]}


def ab_document(benchmark: str, rounds: list[tuple[dict[str, Any], dict[str, Any]]],
                min_ratio: float = 0.95) -> dict[str, Any]:
    """A results file of ``rounds`` (before, after), as ``autoglm bench ab`` writes it."""
    arguments = [benchmark, "--model", "/tmp/m", "--baseline", "none"]
    return {"benchmark": benchmark, "arguments": {"before": arguments, "after": arguments},
            "min_ratio": min_ratio, "revisions": REVISIONS, "machine": MACHINE,
            "rounds": [{"before": before, "after": after} for before, after in rounds]}
