"""Where one encoder call's time goes: attention, matrix multiplies and everything else, by PyTorch's
profiler, and how many attention calls the per-image loop of every block made."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch.profiler import ProfilerActivity, profile

# Operator names (their self time) that make up each part; the rest is "other".
ATTENTION_OPS = ("scaled_dot_product", "flash_attention")
MATMUL_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::linear", "mkldnn", "onednn")


@dataclass(frozen=True)
class EncoderProfile:
    attention_s: float
    matmul_s: float
    other_s: float
    attention_calls: int

    @property
    def total_s(self) -> float:
        return self.attention_s + self.matmul_s + self.other_s

    def to_dict(self) -> dict[str, Any]:
        return {"attention_s": self.attention_s, "matmul_s": self.matmul_s, "other_s": self.other_s,
                "total_s": self.total_s, "attention_calls": self.attention_calls}


def _part(name: str) -> str:
    if any(op in name for op in ATTENTION_OPS):
        return "attention"
    return "matmul" if any(op in name for op in MATMUL_OPS) else "other"


def profile_encoder(encode: Callable[[], object]) -> EncoderProfile:
    """One call of ``encode`` under the profiler; each operator's own time, so nested calls count once."""
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        encode()
    seconds = {"attention": 0.0, "matmul": 0.0, "other": 0.0}
    attention_calls = 0
    for event in profiler.key_averages():
        seconds[_part(event.key)] += event.self_cpu_time_total / 1e6
        if event.key == "aten::scaled_dot_product_attention":
            attention_calls += event.count
    return EncoderProfile(seconds["attention"], seconds["matmul"], seconds["other"], attention_calls)
