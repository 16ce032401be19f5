"""Where one encoder call's time goes: the projections, attention, and everything else, by wall clock
around the encoder's modules (the compiled linear kernels run outside PyTorch's operators, where its
profiler would not see them), and how many attention calls the per-image loop of every block made."""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from autoglm.bench.lib.timing import timed_seconds
from autoglm.models.linear import Linear
from autoglm.models.vision_blocks import VisionAttention
from autoglm.platforms import synchronize

_LINEAR, _ATTENTION, _ATTENTION_PROJECTION = "linear", "attention", "attention projection"


@dataclass(frozen=True)
class EncoderProfile:
    linear_s: float  # every projection, those of attention included
    attention_s: float  # attention less its projections: the rotary and one attention call per image
    other_s: float  # norms, activations, position embeddings, the merge
    attention_calls: int

    @property
    def total_s(self) -> float:
        return self.linear_s + self.attention_s + self.other_s

    def to_dict(self) -> dict[str, Any]:
        return {"linear_s": self.linear_s, "attention_s": self.attention_s, "other_s": self.other_s,
                "total_s": self.total_s, "attention_calls": self.attention_calls}


def _part(module: nn.Module, attention_projections: set[int]) -> str | None:
    if isinstance(module, VisionAttention):
        return _ATTENTION
    if isinstance(module, Linear):
        return _ATTENTION_PROJECTION if id(module) in attention_projections else _LINEAR
    return None


def profile_encoder(encoder: nn.Module, encode: Callable[[], object], device: torch.device) -> EncoderProfile:
    """One call of ``encode`` with every projection and attention module of ``encoder`` timed."""
    seconds: dict[str, float] = defaultdict(float)
    started: dict[int, float] = {}
    attention_calls = 0

    def start(module: nn.Module, args: tuple) -> None:
        nonlocal attention_calls
        if isinstance(module, VisionAttention):
            attention_calls += len(args[2])  # one call per segment (image) of its segment lengths
        synchronize(device)
        started[id(module)] = time.perf_counter()

    def end(part: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, output: object) -> None:
            synchronize(device)
            seconds[part] += time.perf_counter() - started.pop(id(module))
        return hook

    attention_projections = {id(linear) for module in encoder.modules() if isinstance(module, VisionAttention)
                             for linear in module.modules() if isinstance(linear, Linear)}
    handles = []
    for module in encoder.modules():
        part = _part(module, attention_projections)
        if part is not None:
            handles += [module.register_forward_pre_hook(start), module.register_forward_hook(end(part))]
    try:
        total_s = timed_seconds(encode, device)
    finally:
        for handle in handles:
            handle.remove()
    linear_s = seconds[_LINEAR] + seconds[_ATTENTION_PROJECTION]
    attention_s = seconds[_ATTENTION] - seconds[_ATTENTION_PROJECTION]
    return EncoderProfile(linear_s, attention_s, total_s - linear_s - attention_s, attention_calls)
