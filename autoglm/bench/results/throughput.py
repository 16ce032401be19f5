"""What one side of a benchmark measured, and the rates derived from it."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from autoglm.profiling import StepProfile


@dataclass(frozen=True)
class ThroughputResult:
    """Token counts of a whole workload and the wall time it took (model load excluded)."""

    num_requests: int
    prompt_tokens: int
    output_tokens: int
    elapsed_s: float

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.elapsed_s

    @property
    def total_tokens_per_s(self) -> float:
        return (self.prompt_tokens + self.output_tokens) / self.elapsed_s

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "output_tokens_per_s": self.output_tokens_per_s,
            "total_tokens_per_s": self.total_tokens_per_s,
        }


@dataclass(frozen=True)
class EngineThroughputResult(ThroughputResult):
    """The engine's side also says how its scheduler and cache fared."""

    mean_ttft_s: float
    median_ttft_s: float
    num_preemptions: int
    prefix_cache_hit_rate: float  # prompt tokens served from the cache / prompt tokens looked up
    compute_dtype: str  # float32 where the CPU would only emulate the requested half precision
    profile: StepProfile | None = None  # where the steps' time went, with ``--profile``
    weights: str = ""  # what a decode step reads: ``bfloat16``, ``int8, bfloat16 head`` (see WeightFormat.label)
    kv_cache_dtype: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        fields = super().to_dict()
        fields["profile"] = None if self.profile is None else self.profile.to_dict()
        return fields


def speedup(engine: ThroughputResult, baseline: ThroughputResult) -> dict[str, float]:
    """Engine rate over baseline rate, for each rate."""
    return {
        "output_tokens_per_s": engine.output_tokens_per_s / baseline.output_tokens_per_s,
        "total_tokens_per_s": engine.total_tokens_per_s / baseline.total_tokens_per_s,
    }
